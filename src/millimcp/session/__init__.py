"""The async driver: decoded requests routed to handlers, request contexts, the era fronts,
handshake-era sessions.

:class:`Router` runs one request to an :class:`Outcome`; :class:`HttpEndpoint` serves both
eras over Streamable HTTP on it, :class:`LineConnection` both eras over a line transport
(stdio). See ``docs/architecture.md`` for the path of one request.
"""

from millimcp.session.context import Attachments, Context, InputRequired
from millimcp.session.http import HttpEndpoint
from millimcp.session.lines import LineConnection
from millimcp.session.mrtr import Mrtr
from millimcp.session.router import Outcome, RequestHandler, Router
from millimcp.session.sessions import Session, SessionConfig, SessionStore

__all__ = [
    "Attachments",
    "Context",
    "HttpEndpoint",
    "InputRequired",
    "LineConnection",
    "Mrtr",
    "Outcome",
    "RequestHandler",
    "Router",
    "Session",
    "SessionConfig",
    "SessionStore",
]
