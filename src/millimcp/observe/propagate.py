"""Trace context for downstream calls: the headers that carry it, and a client span.

A tool that calls another service passes the request's trace on::

    with downstream("GET", url) as headers:
        response = await http.get(url, headers=headers)

With OpenTelemetry installed (:func:`millimcp.observe.otel.install`), ``downstream`` opens
a ``CLIENT`` span, a child of the MCP server span, and the headers carry that span's
``traceparent``. Without it, the caller's ``traceparent``/``tracestate``/``baggage`` from
``params._meta`` are passed through unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping
from typing import Protocol

from millimcp.observe.hook import current_record

__all__ = ["TraceBridge", "downstream", "set_bridge", "trace_headers"]


class TraceBridge(Protocol):
    """What a tracing library offers this module (see ``millimcp.observe.otel``)."""

    def inject(self, headers: MutableMapping[str, str]) -> None: ...

    def client_span(self, method: str, url: str) -> contextlib.AbstractContextManager[object]: ...


_bridge: TraceBridge | None = None


def set_bridge(bridge: TraceBridge | None) -> None:
    global _bridge
    _bridge = bridge


def trace_headers(headers: MutableMapping[str, str] | None = None) -> MutableMapping[str, str]:
    """``headers`` (a new dict if None) plus the current trace context, for an HTTP call."""
    out: MutableMapping[str, str] = {} if headers is None else headers
    if _bridge is not None:
        _bridge.inject(out)
        return out
    record = current_record()
    meta = record.meta if record is not None else None
    if meta is not None and meta.traceparent is not None:
        out["traceparent"] = meta.traceparent
        if meta.tracestate is not None:
            out["tracestate"] = meta.tracestate
        if meta.baggage is not None:
            out["baggage"] = meta.baggage
    return out


@contextlib.contextmanager
def downstream(
    method: str, url: str, headers: MutableMapping[str, str] | None = None
) -> Iterator[MutableMapping[str, str]]:
    """A client span around one outgoing HTTP call; yields the headers to send with it."""
    if _bridge is None:
        yield trace_headers(headers)
        return
    with _bridge.client_span(method, url):
        yield trace_headers(headers)
