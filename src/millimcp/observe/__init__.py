"""Observability: one trace hook, stage timings, Server-Timing, metrics, traces and logs.

The core calls :data:`TRACE` (see :mod:`millimcp.observe.hook`); it costs one ``if`` when
nobody listens. Adapters listen to it: Prometheus (``millimcp.observe.prometheus``, extra
``metrics``), OpenTelemetry (``millimcp.observe.otel``, extra ``otel``). Queue-based logging
is in :mod:`millimcp.observe.logs`, trace-context propagation for downstream calls in
:mod:`millimcp.observe.propagate`.
"""

from __future__ import annotations

from millimcp.observe.hook import TRACE, Listener, TraceHook, clock, current_record
from millimcp.observe.propagate import downstream, trace_headers
from millimcp.observe.record import STAGES, RequestRecord

__all__ = [
    "SERVER_TIMING",
    "STAGES",
    "TRACE",
    "Listener",
    "RequestRecord",
    "TraceHook",
    "clock",
    "current_record",
    "downstream",
    "trace_headers",
]

SERVER_TIMING = Listener()
"""A listener that does nothing: added while some app sends ``Server-Timing``, so that
requests are timed."""
