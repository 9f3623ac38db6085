"""The one exception tree of millimcp.

::

    MillimcpError                       every error this package raises on purpose
    ├── ProtocolError                   a JSON-RPC error: carries its code and HTTP status
    │   ├── ParseError                  -32700  malformed JSON, invalid UTF-8, nesting too deep
    │   ├── InvalidRequest              -32600  not a JSON-RPC 2.0 request or notification
    │   ├── MethodNotFound              -32601  unknown method (HTTP 404)
    │   ├── InvalidParams               -32602  params of the wrong shape, unknown tool/resource
    │   ├── InternalError               -32603  a bug on our side; details never leak
    │   ├── HeaderMismatch              -32020  HTTP headers disagree with the body (HTTP 400)
    │   ├── MissingClientCapability     -32021  the request needs a capability the client lacks
    │   ├── UnsupportedProtocolVersion  -32022  the requested revision is not served
    │   ├── SessionRequired             -32000  a handshake-era request without a session (400)
    │   ├── SessionNotFound             -32001  unknown or expired ``Mcp-Session-Id`` (404)
    │   ├── TooManySessions             -32002  the live-session cap is reached (503)
    │   └── Overloaded                  -32050  too many calls in flight and queued (HTTP 503,
    │                                           ``Retry-After``): retry later, with backoff
    ├── TransportError                  refused before any JSON-RPC was read
    │   ├── RequestRejected             an HTTP-level refusal (403 origin, 413 size, 415, 406...)
    │   ├── FrameTooLarge               a frame (body, stdio line) over its size limit
    │   ├── ResponseFramingError        (lab) an HTTP/1.1 response the lab's reader cannot frame
    │   ├── NotSent                     (client) the request certainly never reached the server
    │   └── ConnectionLost              (client) the peer vanished after the request may have
    │                                   reached it
    ├── ClientError                     (client) a call refused or abandoned on this side
    │   ├── CallTimeout                 the call's deadline passed (also a TimeoutError)
    │   ├── QueueFull                   the concurrency cap and its wait queue are full
    │   └── AuthorizationFailed         the OAuth flow could not get a usable token (discovery,
    │                                   a metadata check, registration, the token endpoint)
    ├── ToolError                       raised by a tool: becomes ``isError: true``, not a
    │                                   protocol error, so the model can read and correct it
    ├── TensorFormatError               tensor bytes or header malformed or over a cap
    │                                   (also a ValueError)
    └── ConfigurationError              a server or client set up wrongly (at start, not per call)
        ├── InvalidHeaderDeclaration    a tool's ``x-mcp-header`` declarations break the spec's
        │                               rules (the server refuses to register it, the client
        │                               leaves it out of ``tools/list``)
        └── MissingExtra                an optional dependency is not installed: names the
                                        ``pip install 'millimcp[extra]'`` (also an ImportError)

The lab's own failures subclass these where they are raised: ``lab.profile.ProfileError``
(a :class:`MillimcpError`) and ``lab.scenario_format.ReferenceFailed`` (a
:class:`MillimcpError` and a ``LookupError``).

Every :class:`ProtocolError` knows how it looks on the wire (``code``, ``message``, ``data``)
and which HTTP status the Streamable HTTP binding gives it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AuthorizationFailed",
    "CallTimeout",
    "ClientError",
    "ConfigurationError",
    "ConnectionLost",
    "FrameTooLarge",
    "HeaderMismatch",
    "InternalError",
    "InvalidHeaderDeclaration",
    "InvalidParams",
    "InvalidRequest",
    "MethodNotFound",
    "MillimcpError",
    "MissingClientCapability",
    "MissingExtra",
    "NotSent",
    "Overloaded",
    "ParseError",
    "ProtocolError",
    "QueueFull",
    "RequestRejected",
    "ResponseFramingError",
    "SessionNotFound",
    "SessionRequired",
    "TensorFormatError",
    "TooManySessions",
    "ToolError",
    "TransportError",
    "UnsupportedProtocolVersion",
    "error_from_code",
]


class MillimcpError(Exception):
    """Root of every error millimcp raises on purpose."""


class ProtocolError(MillimcpError):
    """An error that is answered with a JSON-RPC error object.

    ``code`` and ``http_status`` are the class's unless the instance says otherwise (an error
    a client read keeps the peer's code and the HTTP status it came with).
    """

    code: int = -32603
    http_status: int = 500

    def __init__(
        self,
        message: str,
        data: Any = None,
        *,
        http_status: int | None = None,
        request_id: int | str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        self.request_id = request_id
        """The id of the request this answers, when the error is raised before it is known."""
        self.retry_after_s = retry_after_s
        """How long to wait before retrying, when the peer said (``Retry-After``)."""
        if http_status is not None:
            self.http_status = http_status

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"


class ParseError(ProtocolError):
    code = -32700
    http_status = 400


class InvalidRequest(ProtocolError):
    code = -32600
    http_status = 400


class MethodNotFound(ProtocolError):
    code = -32601
    http_status = 404


class InvalidParams(ProtocolError):
    code = -32602
    http_status = 400


class InternalError(ProtocolError):
    code = -32603
    http_status = 500


class HeaderMismatch(ProtocolError):
    code = -32020
    http_status = 400


class MissingClientCapability(ProtocolError):
    code = -32021
    http_status = 400


class UnsupportedProtocolVersion(ProtocolError):
    code = -32022
    http_status = 400


class SessionRequired(ProtocolError):
    """A handshake-era request that needs ``Mcp-Session-Id`` (or ``initialize`` first)."""

    code = -32000
    http_status = 400


class SessionNotFound(ProtocolError):
    """The session ended (DELETE, idle timeout) or never existed: start a new one."""

    code = -32001
    http_status = 404


class TooManySessions(ProtocolError):
    """Every session slot is taken; the client may retry after ``Retry-After`` seconds."""

    code = -32002
    http_status = 503


class Overloaded(ProtocolError):
    """The server refuses a call because its in-flight limit and wait queue are full.

    Answered at once (never queued) with HTTP 503 and ``Retry-After: retry_after_s``; the
    JSON-RPC error's ``data`` carries ``retryAfterMs``. Safe to retry: the call never ran.
    """

    code = -32050
    http_status = 503

    def __init__(self, message: str, data: Any = None, *, retry_after_s: float = 1) -> None:
        super().__init__(message, data, retry_after_s=retry_after_s)


class TransportError(MillimcpError):
    """Refused at the transport, before (or instead of) reading a JSON-RPC message."""


class RequestRejected(TransportError):
    """An HTTP-level refusal with a status code (and ``Retry-After``, when the peer sent it)."""

    def __init__(self, status: int, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after_s = retry_after_s


class FrameTooLarge(TransportError):
    """A body or line over its size limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"message larger than the limit of {limit} bytes")
        self.limit = limit


class ResponseFramingError(TransportError):
    """An HTTP/1.1 response the lab's reader cannot frame: a bad status line, a bad
    ``Content-Length`` or chunk size, or no framing where one is required."""


class NotSent(TransportError):
    """The request never reached the server (connect refused, DNS, pool closed): always safe
    to retry."""


class ConnectionLost(TransportError):
    """The connection broke after the request may have reached the server: retried only
    when the call is idempotent."""


class ClientError(MillimcpError):
    """A call refused or abandoned on the client's side, never seen by the server as an error."""


class CallTimeout(ClientError, TimeoutError):
    """The call's deadline passed; the client cancelled it on the server."""


class QueueFull(ClientError):
    """The client's cap on calls in flight is reached and its wait queue is full."""


class AuthorizationFailed(ClientError):
    """The client's OAuth flow stopped: a document missing or failing a check the spec
    requires (resource, issuer, PKCE, ``iss``), or an authorization/token endpoint error.
    The message never contains a token or a secret."""


class ToolError(MillimcpError):
    """Raise inside a tool to return ``isError: true`` with this message as its text."""


class TensorFormatError(MillimcpError, ValueError):
    """Tensor bytes that break the wire format: a forged header, a bad dtype, over a cap."""


class ConfigurationError(MillimcpError):
    """A server, tool or client was configured wrongly."""


class InvalidHeaderDeclaration(ConfigurationError):
    """A tool's ``x-mcp-header`` declarations break the 2026-07-28 HTTP binding's rules."""


class MissingExtra(ConfigurationError, ImportError):
    """What was asked for needs an optional dependency that is not installed.

    The message is one line a user can act on: what needed it and the ``pip install`` line.
    """

    def __init__(self, extra: str, what: str, missing: str | None = None) -> None:
        because = f" ({missing} is not installed)" if missing else ""
        super().__init__(
            f"{what} needs the {extra!r} extra{because}: pip install 'millimcp[{extra}]'"
        )
        self.extra = extra
        self.what = what
        self.missing = missing


def error_from_code(code: int, message: str, data: Any = None) -> ProtocolError:
    """The :class:`ProtocolError` for a JSON-RPC error a peer sent (a client reading a reply).

    A known code gets its own class; any other code a plain :class:`ProtocolError` that keeps
    the peer's code.
    """
    for cls in _BY_CODE:
        if cls.code == code:
            return cls(message, data)
    error = ProtocolError(message, data)
    error.code = code
    return error


_BY_CODE: tuple[type[ProtocolError], ...] = (
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    HeaderMismatch,
    MissingClientCapability,
    UnsupportedProtocolVersion,
    SessionRequired,
    SessionNotFound,
    TooManySessions,
    Overloaded,
)
