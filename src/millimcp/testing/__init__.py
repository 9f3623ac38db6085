"""Helpers for testing millimcp servers (yours and ours) without a network.

:func:`connect` gives a :class:`~millimcp.client.Client` wired to a ``Server`` in memory
(see ``docs/testing.md``); :func:`http_scope` the ASGI scope of one HTTP request, for driving
an app by hand.
"""

from millimcp.testing.asgi import http_scope
from millimcp.testing.connect import connect

__all__ = ["connect", "http_scope"]
