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

__all__ = ["STAGES", "RequestRecord"]

STAGES: Final = ("decode", "validate", "cache", "handler", "encode", "compress")

_clock: Final = time.perf_counter_ns


class RequestRecord:
    """Timestamps and facts of one request; filled by the dispatcher, tools and cache."""

    __slots__ = (
        "_mark",
        "cache_ns",
        "cache_outcome",
        "compress_ns",
        "decode_ns",
        "encode_ns",
        "error_code",
        "error_type",
        "extra",
        "handler_ns",
        "handler_start",
        "headers",
        "meta",
        "method",
        "request_id",
        "status",
        "t0",
        "target",
        "tool_error",
        "total_ns",
        "validate_ns",
    )

    def __init__(
        self, t0: int, method: str, target: str | None, request_id: Any, meta: Any, headers: Any
    ) -> None:
        now = _clock()
        self.t0 = t0
        self.method = method
        self.target = target
        """The tool or prompt name (low cardinality); None for other methods."""
        self.request_id = request_id
        self.meta = meta
        """The request ``_meta`` (protocol version, ``traceparent``...), or None."""
        self.headers = headers
        """The transport's ``McpHeaders`` (None off HTTP)."""
        self.decode_ns = now - t0
        self.handler_start = now
        self.validate_ns = 0
        self.cache_ns = 0
        self.cache_outcome: str | None = None
        self.handler_ns = 0
        self.encode_ns = 0
        self.compress_ns = 0
        self.total_ns = 0
        self.status = 200
        self.error_type: str | None = None
        self.error_code: int | None = None
        self.tool_error = False
        self.extra: dict[str, Any] = {}
        """Room for listeners' own per-request state (an OpenTelemetry span...)."""
        self._mark = now

    def __repr__(self) -> str:
        return f"<RequestRecord {self.method} {self.target or ''} id={self.request_id!r}>"

    def handled(self) -> None:
        """The handler returned (or raised): what follows is encoding."""
        now = _clock()
        self.handler_ns = max(0, now - self.handler_start - self.validate_ns - self.cache_ns)
        self._mark = now

    def encoded(self, status: int) -> None:
        """The response body is encoded."""
        if self._mark == self.handler_start:  # the handler raised: handled() was skipped
            self.handled()
        now = _clock()
        self.encode_ns = now - self._mark
        self.status = status
        self._mark = now

    def sending(self) -> None:
        """The transport is about to send the response headers; the request is timed."""
        now = _clock()
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
        parts = [f"{name};dur={ns / 1e6:.3f}" for name, ns in self.stages().items()]
        if self.cache_outcome is not None:
            parts[2] += f';desc="{self.cache_outcome}"'
        parts.append(f"total;dur={self.total_ns / 1e6:.3f}")
        return ", ".join(parts).encode("ascii")
