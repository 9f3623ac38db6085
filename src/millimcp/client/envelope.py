"""What every request carries for the era in use: its ``_meta`` block and its MCP headers.

The constant part of a request's ``_meta`` (modern era: version, capabilities, identity) is
encoded once per era (:attr:`Envelope.head`); per request only the ``traceparent`` (and a
``progressToken`` when one was asked for) is spliced in, by the call pipeline. The MCP
headers of each (method, name) are computed once and kept. Switching era or version
(:meth:`Envelope.use_modern`, :meth:`Envelope.use_handshake`) drops both and bumps
:attr:`Envelope.generation`, which lets a call that failed under an older era tell whether
someone renegotiated since.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from random import getrandbits
from typing import Any, Final

from millimcp.codec import encode
from millimcp.protocol import encode_header_value
from millimcp.protocol.eras import Era
from millimcp.protocol.types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    LoggingLevel,
)
from millimcp.protocol.types import TASKS_EXTENSION as TASKS

__all__ = ["Envelope", "trace_bytes", "traceparent"]

_NO_HEADERS: Final[Mapping[str, str]] = {}
_MAX_HEADER_SETS: Final = 4096
TRACE_TAIL: Final = b'"}'
"""What closes a ``_meta`` after its ``traceparent`` value."""
_HANDSHAKE_HEAD: Final = b'{"traceparent":"'

_otel_trace: Any = None
_otel_current: Any = None
"""What returns OpenTelemetry's current context: the ``ContextVar`` of its default runtime
context when that is the one in use (one C call), else ``opentelemetry.context.get_current``."""


def traceparent() -> str:
    """A W3C ``traceparent``: the current OpenTelemetry span's when one is active, else a
    fresh random trace (flags ``00``: nothing was recorded on this side)."""
    return trace_bytes().decode()


def trace_bytes() -> bytes:
    """:func:`traceparent` as the bytes a request's ``_meta`` splices in (one formatting
    step, no encoding).

    With the OpenTelemetry API installed, an empty current context (nothing attached: no
    span, the common case) is all it looks at; only a context that holds something is
    asked for its span."""
    current = _otel_current
    if current and current():
        span = _otel_trace.get_current_span().get_span_context()
        if span.is_valid:
            return b"00-%032x-%016x-%02x" % (span.trace_id, span.span_id, int(span.trace_flags))
    return b"00-%032x-%016x-00" % (getrandbits(128) or 1, getrandbits(64) or 1)


def load_otel() -> None:
    """Find the OpenTelemetry API once (absent: fresh random traces)."""
    global _otel_current, _otel_trace
    if _otel_trace is None:
        try:
            from opentelemetry import context, trace
        except ImportError:
            _otel_trace = _otel_current = False
            return
        _otel_trace = trace
        _otel_current = context.get_current
        runtime = getattr(context, "_RUNTIME_CONTEXT", None)
        variable = getattr(runtime, "_current_context", None)
        if type(runtime).__name__ == "ContextVarsRuntimeContext" and isinstance(
            variable, contextvars.ContextVar
        ):
            try:
                variable.get()  # it has a default: never raises LookupError
            except LookupError:
                return
            _otel_current = variable.get


class Envelope:
    """The era-dependent parts of one client's requests.

    ``capabilities`` and ``client_info`` are the builtins of the client's own declaration
    (sent in every modern ``_meta`` and in ``initialize``); ``http`` says whether requests
    carry MCP headers at all; ``log_level``: the ``notifications/message`` level the client
    asks for (every modern ``_meta``; ``logging/setLevel`` after a handshake).
    """

    __slots__ = (
        "_headers",
        "capabilities",
        "client_info",
        "era",
        "generation",
        "head",
        "http",
        "log_level",
        "task_head",
        "version",
    )

    def __init__(
        self,
        *,
        http: bool,
        capabilities: Any,
        client_info: Any,
        log_level: LoggingLevel | None = None,
    ) -> None:
        self.http = http
        self.log_level = log_level
        self.capabilities = capabilities
        self.client_info = client_info
        self.era: Era | None = None
        self.version: str | None = None
        self.generation = 0
        """Bumped by every switch of era or version."""
        self.head = _HANDSHAKE_HEAD
        """This era's ``_meta`` up to the ``traceparent`` value: a request's ``_meta`` is
        ``head + traceparent + TRACE_TAIL``, or with ``","progressToken":N}`` as its tail."""
        self.task_head = _HANDSHAKE_HEAD
        """:attr:`head` with the tasks extension declared too (modern era): the ``_meta`` of
        a call that may become a task, and of ``tasks/*``."""
        self._headers: dict[tuple[str, str | None], Mapping[str, str]] = {}
        load_otel()

    def __repr__(self) -> str:
        return f"<Envelope era={self.era} version={self.version} generation={self.generation}>"

    def use_modern(self, version: str) -> None:
        """Send the modern era's ``_meta`` and headers, at ``version``, from now on."""
        self.era = "modern"
        self.version = version
        self._render()
        self._switched()

    def set_log_level(self, level: LoggingLevel | None) -> None:
        """Ask for ``notifications/message`` at ``level`` (None: none) in the modern
        ``_meta`` from now on (the handshake era's ``logging/setLevel`` is the caller's)."""
        self.log_level = level
        if self.era == "modern":
            self._render()

    def _render(self) -> None:
        """The modern ``_meta`` heads for the version and the log level in use."""
        meta: dict[str, Any] = {
            META_PROTOCOL_VERSION: self.version,
            META_CLIENT_CAPABILITIES: self.capabilities,
            META_CLIENT_INFO: self.client_info,
        }
        if self.log_level is not None:
            meta[META_LOG_LEVEL] = self.log_level
        self.head = encode(meta)[:-1] + b',"traceparent":"'
        capabilities = dict(self.capabilities or {})
        capabilities["extensions"] = {**(capabilities.get("extensions") or {}), TASKS: {}}
        meta[META_CLIENT_CAPABILITIES] = capabilities
        self.task_head = encode(meta)[:-1] + b',"traceparent":"'

    def use_handshake(self, version: str | None) -> None:
        """Send the handshake era's requests (``version`` None until ``initialize`` chose)."""
        self.era = "handshake"
        self.version = version
        self.head = self.task_head = _HANDSHAKE_HEAD
        self._switched()

    def headers_for(self, method: str, name: str | None) -> Mapping[str, str]:
        """The MCP headers of a request (cached per method and name; none over stdio)."""
        if not self.http:
            return _NO_HEADERS
        key = (method, name)
        headers = self._headers.get(key)
        if headers is None:
            version = self.version
            if self.era == "modern" and version is not None:
                headers = {"MCP-Protocol-Version": version, "Mcp-Method": method}
                if name is not None:
                    headers["Mcp-Name"] = encode_header_value(name)
            elif version is not None:
                headers = {"MCP-Protocol-Version": version}
            else:
                headers = _NO_HEADERS
            if len(self._headers) >= _MAX_HEADER_SETS:
                self._headers.clear()
            self._headers[key] = headers
        return headers

    def _switched(self) -> None:
        self._headers.clear()
        self.generation += 1
