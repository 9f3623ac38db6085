"""One request as the trace hook sees it: what was asked, and how long each stage took.

Stages tile the request from the first byte handled to the response headers:
``decode`` (body checks, envelope and params decode, header checks), ``validate`` (tool
arguments), ``cache`` (lookups and stores), ``handler`` (the rest of the handler's time),
``encode`` (the JSON-RPC response) and ``compress`` (whatever the transport does to the
body before sending it). They add up to ``total``.
"""

from __future__ import annotations

import time
from typing import Any, Final

import msgspec

__all__ = ["STAGES", "RequestRecord"]

STAGES: Final = ("decode", "validate", "cache", "handler", "encode", "compress")

_clock: Final = time.perf_counter_ns
_TIMING: Final = (
    b"decode;dur=%.3f, validate;dur=%.3f, cache;dur=%.3f%s, handler;dur=%.3f, "
    b"encode;dur=%.3f, compress;dur=%.3f, total;dur=%.3f"
)


class RequestRecord(msgspec.Struct, eq=False):
    """Timestamps (``perf_counter_ns``) and facts of one request; filled by the dispatcher,
    tools and the cache. A struct: one is built per traced request, in C."""

    t0: int
    """When the first byte was handled."""
    method: str
    target: str | None
    """The tool or prompt name (low cardinality); None for other methods."""
    request_id: Any
    meta: Any
    """The request ``_meta`` (protocol version, ``traceparent``...), or None."""
    headers: Any
    """The transport's ``McpHeaders`` (None off HTTP)."""
    handler_start: int
    decode_ns: int = 0
    validate_ns: int = 0
    cache_ns: int = 0
    cache_outcome: str | None = None
    handler_ns: int = 0
    encode_ns: int = 0
    compress_ns: int = 0
    total_ns: int = 0
    status: int = 200
    tool_error: bool = False
    token: Any = None
    """The hook's context-variable token while the request runs."""
    extra: dict[str, Any] | None = None
    """Room for listeners' own per-request state (an OpenTelemetry span...)."""
    _mark: int = 0

    def __repr__(self) -> str:
        return f"<RequestRecord {self.method} {self.target or ''} id={self.request_id!r}>"

    def handled(self) -> None:
        """The handler returned (or raised): what follows is encoding."""
        now = _clock()
        self.handler_ns = max(0, now - self.handler_start - self.validate_ns - self.cache_ns)
        self._mark = now

    def encoded(self, status: int) -> None:
        """The response body is encoded."""
        if self._mark == 0:  # the handler raised: handled() was skipped
            self.handled()
        now = _clock()
        self.encode_ns = now - self._mark
        self.status = status
        self._mark = now

    def sending(self) -> None:
        """The transport is about to send the response headers; the request is timed."""
        now = _clock()
        if self._mark == 0:
            self._mark = now
        self.compress_ns = now - self._mark
        self.total_ns = now - self.t0

    def stages(self) -> dict[str, int]:
        """Each stage's duration in nanoseconds, in order."""
        return {
            "decode": self.decode_ns,
            "validate": self.validate_ns,
            "cache": self.cache_ns,
            "handler": self.handler_ns,
            "encode": self.encode_ns,
            "compress": self.compress_ns,
        }

    def server_timing(self) -> bytes:
        """The ``Server-Timing`` header value: every stage and the total, in milliseconds."""
        outcome = self.cache_outcome
        return _TIMING % (
            self.decode_ns / 1e6,
            self.validate_ns / 1e6,
            self.cache_ns / 1e6,
            b"" if outcome is None else b';desc="%s"' % outcome.encode(),
            self.handler_ns / 1e6,
            self.encode_ns / 1e6,
            self.compress_ns / 1e6,
            self.total_ns / 1e6,
        )
