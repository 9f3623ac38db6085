"""Prometheus metrics from the trace hook, and ``/metrics`` as a small ASGI wrapper.

Metrics (prometheus-client, extra ``metrics``):

- ``millimcp_request_duration_seconds{method,target}``: histogram per method and tool;
- ``millimcp_requests_in_flight``: gauge;
- ``millimcp_request_errors_total{method,target,status}``: error responses and tool errors
  (``status="tool_error"``);
- ``millimcp_rejected_total{status}``: requests refused before a handler ran (bad input,
  403/413/415...) and calls refused as overloaded (503);
- ``millimcp_cache_lookups_total{tool,outcome}``: ``hit-l1``, ``hit-l2``, ``miss``,
  ``coalesced``, ``bypass``; ``millimcp_cache_fallbacks_total{operation}``: Redis skipped;
- ``millimcp_stage_seconds_total{stage}``: time per stage (decode, validate, cache, handler,
  encode, compress); the share of serialization is
  ``sum(rate(...{stage=~"decode|encode|compress"})) / sum(rate(...))``, also reported as the
  gauge ``millimcp_serialization_share`` (since start, per process);
- ``millimcp_event_loop_lag_seconds``: histogram of timer oversleep (a busy loop).

Stage times are summed in plain integers on the hot path and flushed into the counters by
the lag probe (every 0.25 s) and at each scrape (S5.5: metrics off the critical path).

When ``PROMETHEUS_MULTIPROC_DIR`` is set (``millimcp serve --workers N``), prometheus-client's
multi-process mode aggregates every worker at scrape time.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from millimcp.errors import ConfigurationError
from millimcp.observe.hook import TRACE, Listener
from millimcp.observe.lag import LagProbe
from millimcp.observe.record import STAGES, RequestRecord

__all__ = ["MetricsApp", "PrometheusListener", "install"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_LATENCY_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
_LAG_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
_SERIALIZATION: Final = ("decode", "encode", "compress")


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ConfigurationError(
            "/metrics needs prometheus-client: pip install 'millimcp[metrics]'"
        ) from None
    return prometheus_client


class PrometheusListener(Listener):
    """Feeds the metrics above from the trace hook. One per process: see :func:`install`."""

    def __init__(self) -> None:
        prom = _client()
        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.registry = None if self.multiprocess else prom.CollectorRegistry()
        reg = self.registry
        self.duration = prom.Histogram(
            "millimcp_request_duration_seconds",
            "Time from the first byte handled to the response, per method and tool.",
            ["method", "target"],
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        self.in_flight = prom.Gauge(
            "millimcp_requests_in_flight",
            "Requests being handled.",
            multiprocess_mode="livesum",
            registry=reg,
        )
        self.errors = prom.Counter(
            "millimcp_request_errors",
            "Error responses (HTTP status) and tool errors (isError).",
            ["method", "target", "status"],
            registry=reg,
        )
        self.rejected = prom.Counter(
            "millimcp_rejected",
            "Requests refused before a handler ran, and calls refused as overloaded.",
            ["status"],
            registry=reg,
        )
        self.cache = prom.Counter(
            "millimcp_cache_lookups",
            "Tool-result cache lookups by outcome.",
            ["tool", "outcome"],
            registry=reg,
        )
        self.fallbacks = prom.Counter(
            "millimcp_cache_fallbacks",
            "Redis operations skipped or failed; the call went on with the in-process tier.",
            ["operation"],
            registry=reg,
        )
        self.stage_seconds = prom.Counter(
            "millimcp_stage_seconds",
            "Time spent per request stage.",
            ["stage"],
            registry=reg,
        )
        self.serialization_share = prom.Gauge(
            "millimcp_serialization_share",
            "Share of request time spent decoding, encoding and compressing (since start).",
            multiprocess_mode="liveall",
            registry=reg,
        )
        self.loop_lag = prom.Histogram(
            "millimcp_event_loop_lag_seconds",
            "How late a 0.25 s timer fired: time the event loop was busy.",
            buckets=_LAG_BUCKETS,
            registry=reg,
        )
        self._stage_children = {stage: self.stage_seconds.labels(stage) for stage in STAGES}
        self._durations: dict[tuple[str, str], Any] = {}
        self._pending = dict.fromkeys(STAGES, 0)
        self._sums = dict.fromkeys(STAGES, 0)
        self.probe = LagProbe(self._lagged)

    def __repr__(self) -> str:
        mode = "multiprocess" if self.multiprocess else "single process"
        return f"<PrometheusListener {mode}>"

    # -- the trace hook ----------------------------------------------------------------------

    def started(self, record: RequestRecord) -> None:
        self.in_flight.inc()
        if not self.probe.running:
            self.probe.ensure_running()

    def ended(self, record: RequestRecord) -> None:
        self.in_flight.dec()
        key = (record.method, record.target or "")
        child = self._durations.get(key)
        if child is None:
            child = self._durations[key] = self.duration.labels(*key)
        child.observe(record.total_ns / 1e9)
        pending = self._pending
        pending["decode"] += record.decode_ns
        pending["validate"] += record.validate_ns
        pending["cache"] += record.cache_ns
        pending["handler"] += record.handler_ns
        pending["encode"] += record.encode_ns
        pending["compress"] += record.compress_ns
        status = record.status
        if status >= 400:
            self.errors.labels(record.method, key[1], str(status)).inc()
            if status == 503:
                self.rejected.labels("503").inc()
        elif record.tool_error:
            self.errors.labels(record.method, key[1], "tool_error").inc()

    def event(self, name: str, labels: tuple[str, ...], value: float) -> None:
        if name == "cache":
            self.cache.labels(*labels).inc(value)
        elif name == "cache_fallback":
            self.fallbacks.labels(*labels).inc(value)
        elif name == "rejected":
            self.rejected.labels(*labels).inc(value)

    # -- periodic work -------------------------------------------------------------------------

    def _lagged(self, seconds: float) -> None:
        self.loop_lag.observe(seconds)
        self.flush()

    def flush(self) -> None:
        """Move the stage times summed since the last flush into the counters."""
        pending = self._pending
        if not any(pending.values()):
            return
        for stage, ns in pending.items():
            if ns:
                self._stage_children[stage].inc(ns / 1e9)
                self._sums[stage] += ns
                pending[stage] = 0
        total = sum(self._sums.values())
        if total:
            self.serialization_share.set(sum(self._sums[s] for s in _SERIALIZATION) / total)

    def exposition(self) -> tuple[bytes, str]:
        """The metrics in the text format, and its content type."""
        prom = _client()
        self.flush()
        registry = self.registry
        if registry is None:
            from prometheus_client import multiprocess

            registry = prom.CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return prom.generate_latest(registry), prom.CONTENT_TYPE_LATEST


_installed: PrometheusListener | None = None


def install() -> PrometheusListener:
    """The process's Prometheus listener, created and added to the trace hook once."""
    global _installed
    if _installed is None:
        _installed = PrometheusListener()
    TRACE.add(_installed)
    return _installed


class MetricsApp:
    """An ASGI app that answers ``GET {path}`` with the metrics and passes the rest on."""

    def __init__(self, app: Any, path: str = "/metrics") -> None:
        self.app = app
        self.path = path
        self.metrics = install()

    def __repr__(self) -> str:
        return f"<MetricsApp {self.path} around {self.app!r}>"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)  # the wrapped app's handler, config...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in (
            self.path,
            scope.get("root_path", "") + self.path,
        ):
            await self._serve(scope, send)
            return
        if scope["type"] == "lifespan":
            await self.app(scope, self._watch_shutdown(receive), send)
            return
        await self.app(scope, receive, send)

    def _watch_shutdown(self, receive: Receive) -> Receive:
        async def watched() -> MutableMapping[str, Any]:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                self.metrics.probe.stop()
            return message

        return watched

    async def _serve(self, scope: Scope, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            headers = [(b"allow", b"GET, HEAD"), (b"content-type", b"text/plain")]
            await send({"type": "http.response.start", "status": 405, "headers": headers})
            await send({"type": "http.response.body", "body": b"Method Not Allowed"})
            return
        self.metrics.probe.ensure_running()
        body, content_type = self.metrics.exposition()
        headers = [
            (b"content-type", content_type.encode()),
            (b"content-length", b"%d" % len(body)),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(
            {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body}
        )
