"""Helpers for testing millimcp servers (yours and ours).

:func:`connect` gives a :class:`~millimcp.client.Client` wired to a ``Server`` in memory
(see ``docs/testing.md``); :func:`http_scope` the ASGI scope of one HTTP request, for driving
an app by hand; :func:`modern_request` a hand-built 2026-07-28 request; :func:`serve_subprocess`
and its parts run a server in a subprocess on a free port.
"""

from millimcp.testing.asgi import http_scope
from millimcp.testing.connect import connect
from millimcp.testing.processes import (
    ServedProcess,
    free_port,
    serve_subprocess,
    start_subprocess,
    stop_process,
    wait_for_port,
)
from millimcp.testing.requests import MODERN_VERSION, modern_meta, modern_request

__all__ = [
    "MODERN_VERSION",
    "ServedProcess",
    "connect",
    "free_port",
    "http_scope",
    "modern_meta",
    "modern_request",
    "serve_subprocess",
    "start_subprocess",
    "stop_process",
    "wait_for_port",
]
