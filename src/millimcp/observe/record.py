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
    b"decode;dur=%s, validate;dur=%s, cache;dur=%s%s, handler;dur=%s, "
    b"encode;dur=%s, compress;dur=%s, total;dur=%s"
)
_MS: Final = tuple(b"0.%03d" % us for us in range(1000))
"""Milliseconds with three decimals for 0-999 us: a lookup instead of float formatting."""


def _ms(us: int) -> bytes:
    """Milliseconds with three decimals for ``us`` >= 1000 (or negative: clamped to 0)."""
    return b"%d.%03d" % divmod(us, 1000) if us > 0 else b"0.000"


class RequestRecord(msgspec.Struct, eq=False):
    """Timestamps (``perf_counter_ns``) and facts of one request; filled by the HTTP fronts,
    tools and the cache. A struct: one is built per traced request, in C.

    The request path only stores timestamps (``handler_start``, ``handled_at``,
    ``encoded_at``, ``sent_at``) and the two measured durations (``validate_ns``,
    ``cache_ns``); the stage durations (``decode_ns``...) are derived when read.
    """

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
    """Decoding ended, the handler's stages began."""
    handled_at: int = 0
    """The handler returned (0 until then; the hook fills it when the handler raised)."""
    encoded_at: int = 0
    """The response body was encoded."""
    sent_at: int = 0
    """The transport was about to send the response headers: the end of the request."""
    validate_ns: int = 0
    cache_ns: int = 0
    cache_outcome: str | None = None
    status: int = 200
    tool_error: bool = False
    token: Any = None
    """The hook's context-variable token while the request runs."""
    extra: dict[str, Any] | None = None
    """Room for listeners' own per-request state (an OpenTelemetry span...)."""

    def __repr__(self) -> str:
        return f"<RequestRecord {self.method} {self.target or ''} id={self.request_id!r}>"

    def settle(self) -> None:
        """Fill the timestamps a request that ended early (an exception, a disconnect, a
        stream) did not reach, so that the stages still tile the total."""
        if not self.sent_at:
            self.sent_at = _clock()
        if not self.encoded_at:
            self.encoded_at = self.handled_at or self.sent_at
        if not self.handled_at:
            self.handled_at = self.encoded_at

    @property
    def decode_ns(self) -> int:
        return self.handler_start - self.t0

    @property
    def handler_ns(self) -> int:
        if not self.handled_at:
            return 0
        return max(0, self.handled_at - self.handler_start - self.validate_ns - self.cache_ns)

    @property
    def encode_ns(self) -> int:
        return self.encoded_at - self.handled_at if self.encoded_at and self.handled_at else 0

    @property
    def compress_ns(self) -> int:
        return self.sent_at - self.encoded_at if self.sent_at and self.encoded_at else 0

    @property
    def total_ns(self) -> int:
        return self.sent_at - self.t0 if self.sent_at else 0

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
        """The ``Server-Timing`` header value: every stage and the total, in milliseconds
        (truncated to the microsecond). Called once ``sent_at`` is set."""
        t0 = self.t0
        start = self.handler_start
        encoded = self.encoded_at
        handled = self.handled_at or encoded
        sent = self.sent_at
        validate_ns = self.validate_ns
        cache_ns = self.cache_ns
        outcome = self.cache_outcome
        ms = _MS
        total = (sent - t0) // 1000
        handler_ns = handled - start - validate_ns - cache_ns
        if total < 1000 and handler_ns >= 0:  # the usual case: every stage under 1 ms
            return _TIMING % (
                ms[(start - t0) // 1000],
                ms[validate_ns // 1000],
                ms[cache_ns // 1000],
                b"" if outcome is None else b';desc="%s"' % outcome.encode(),
                ms[handler_ns // 1000],
                ms[(encoded - handled) // 1000],
                ms[(sent - encoded) // 1000],
                ms[total],
            )
        validate = validate_ns // 1000
        cache = cache_ns // 1000
        return _TIMING % (
            ms[d] if (d := (start - t0) // 1000) < 1000 else _ms(d),
            ms[validate] if validate < 1000 else _ms(validate),
            ms[cache] if cache < 1000 else _ms(cache),
            b"" if outcome is None else b';desc="%s"' % outcome.encode(),
            ms[h]
            if 0 <= (h := (handled - start - validate_ns - cache_ns) // 1000) < 1000
            else _ms(h),
            ms[e] if (e := (encoded - handled) // 1000) < 1000 else _ms(e),
            ms[c] if (c := (sent - encoded) // 1000) < 1000 else _ms(c),
            ms[t] if (t := (sent - t0) // 1000) < 1000 else _ms(t),
        )
