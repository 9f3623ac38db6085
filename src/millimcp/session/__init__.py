"""The async driver: dispatch of decoded requests to handlers, request contexts, sessions."""

from millimcp.session.context import Context, InputRequired
from millimcp.session.dispatcher import Dispatcher, RequestHandler
from millimcp.session.lines import LineConnection
from millimcp.session.sessions import Session, SessionConfig, SessionStore

__all__ = [
    "Context",
    "Dispatcher",
    "InputRequired",
    "LineConnection",
    "RequestHandler",
    "Session",
    "SessionConfig",
    "SessionStore",
]
