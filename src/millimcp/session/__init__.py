"""The async driver: dispatch of decoded requests to handlers, request contexts."""

from millimcp.session.context import Context, InputRequired
from millimcp.session.dispatcher import Dispatcher, RequestHandler

__all__ = ["Context", "Dispatcher", "InputRequired", "RequestHandler"]
