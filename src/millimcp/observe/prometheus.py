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

The request path only appends a row of the finished record's values to a list; the lag
probe (every 0.25 s), every 1024th request and each scrape flush the list into the metrics
(S5.5: metrics off the critical path), aggregating in C (sorted, grouped, summed). In one
process the latency histograms are counted in plain lists and exposed by a collector of our
own.

When ``PROMETHEUS_MULTIPROC_DIR`` is set (``millimcp serve --workers N``), prometheus-client's
multi-process mode aggregates every worker at scrape time.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import operator
import os
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from itertools import repeat
from typing import Any, Final

from millimcp.errors import ConfigurationError
from millimcp.observe.hook import TRACE, Listener
from millimcp.observe.lag import LagProbe
from millimcp.observe.record import STAGES, RequestRecord

__all__ = ["MetricsApp", "PrometheusListener", "install", "probed"]

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


class _Durations:
    """Per-(method, target) latency histograms counted in plain lists (single process)."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = [int(b * 1e9) for b in bounds]
        self.labels = [str(b) for b in bounds] + ["+Inf"]
        self.series: dict[tuple[str, str], list[int]] = {}
        """key -> [count per bucket..., +Inf bucket, sum_ns]."""

    def add_many(self, key: tuple[str, str], durations: list[int]) -> None:
        """Count a batch of durations (nanoseconds) of one series."""
        series = self.series.get(key)
        if series is None:
            series = self.series[key] = [0] * (len(self.bounds) + 2)
        bounds = self.bounds
        for bucket, count in Counter(map(bisect.bisect_left, repeat(bounds), durations)).items():
            series[bucket] += count
        series[-1] += sum(durations)

    def collect(self) -> Any:
        from prometheus_client.core import HistogramMetricFamily

        family = HistogramMetricFamily(
            "millimcp_request_duration_seconds",
            "Time from the first byte handled to the response, per method and tool.",
            labels=["method", "target"],
        )
        for key, series in self.series.items():
            cumulative, buckets = 0, []
            for label, count in zip(self.labels, series[:-1], strict=True):
                cumulative += count
                buckets.append((label, cumulative))
            family.add_metric(list(key), buckets, series[-1] / 1e9)
        yield family


class PrometheusListener(Listener):
    """Feeds the metrics above from the trace hook. One per process: see :func:`install`.

    The request path only counts and appends the record to a list; :meth:`flush` (every
    0.25 s from the lag probe, every 1024 requests, and at each scrape) does the rest.
    """

    def __init__(self) -> None:
        prom = _client()
        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.registry = None if self.multiprocess else prom.CollectorRegistry()
        reg = self.registry
        if reg is None:
            self.duration: Any = prom.Histogram(
                "millimcp_request_duration_seconds",
                "Time from the first byte handled to the response, per method and tool.",
                ["method", "target"],
                buckets=_LATENCY_BUCKETS,
            )
            self._durations: _Durations | None = None
        else:
            self.duration = None
            self._durations = _Durations(_LATENCY_BUCKETS)
            reg.register(self._durations)
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
        self.batches = prom.Counter(
            "millimcp_batches",
            "Model batches run, by model and rows in the batch (the sizes the batcher chose).",
            ["model", "rows"],
            registry=reg,
        )
        self.batch_rows = prom.Counter(
            "millimcp_batch_rows", "Rows run in model batches.", ["model"], registry=reg
        )
        self.batch_wait = prom.Counter(
            "millimcp_batch_queue_wait_seconds",
            "Time requests waited in a model's batch queue, summed over requests.",
            ["model"],
            registry=reg,
        )
        self.batch_run = prom.Counter(
            "millimcp_batch_run_seconds",
            "Time model batches ran; divided by millimcp_batch_rows: the cost per row.",
            ["model"],
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
        self._pending: list[tuple[Any, ...]] = []
        """One row per ended request (``_ROW``): plain values, not the record, so that the
        batch keeps no request objects alive (nor gives the garbage collector more to scan)."""
        self._events: dict[tuple[str, tuple[str, ...]], float] = {}
        self._sums = dict.fromkeys(STAGES, 0)
        self.probe = LagProbe(self._lagged)

    def __repr__(self) -> str:
        mode = "multiprocess" if self.multiprocess else "single process"
        return f"<PrometheusListener {mode} pending={len(self._pending)}>"

    # -- the trace hook (the request path: count and append only) ----------------------------

    def ended(self, record: RequestRecord) -> None:
        pending = self._pending
        pending.append(_ROW(record))
        if len(pending) >= 1024:
            self.flush()

    def event(self, name: str, labels: tuple[str, ...], value: float) -> None:
        key = (name, labels)
        self._events[key] = self._events.get(key, 0.0) + value

    # -- periodic work -------------------------------------------------------------------------

    def _lagged(self, seconds: float) -> None:
        self.loop_lag.observe(seconds)
        self.flush()

    def flush(self) -> None:
        """Move what the request path gathered since the last flush into the metrics."""
        records, self._pending = self._pending, []
        events, self._events = self._events, {}
        if not self.probe.running:
            with contextlib.suppress(RuntimeError):  # no running loop: the next flush
                self.probe.ensure_running()
        self.in_flight.set(TRACE.in_flight)
        for (name, labels), value in events.items():
            metric = _EVENT_METRICS.get(name)
            if metric is not None:
                getattr(self, metric).labels(*labels).inc(value)
        if not records:
            return
        # Aggregated in C (sums and counters over attrgetter maps): the request path only
        # stored timestamps, and a stage's total is a difference of timestamp sums.
        durations = self._durations
        records.sort(key=_KEY)
        for key, group in itertools.groupby(records, _KEY):
            batch = list(group)
            label = (key[0], key[1] or "")
            totals = list(map(operator.sub, map(_SENT, batch), map(_T0, batch)))
            if durations is not None:
                durations.add_many(label, totals)
            else:
                observe = self.duration.labels(*label).observe
                for ns in totals:
                    observe(ns / 1e9)
        for (method, target, status, tool_error), count in Counter(map(_OUTCOME, records)).items():
            if status >= 400:
                self.errors.labels(method, target or "", str(status)).inc(count)
                if status == 503:
                    self.rejected.labels("503").inc(count)
            elif tool_error:
                self.errors.labels(method, target or "", "tool_error").inc(count)
        t0 = sum(map(_T0, records))
        start = sum(map(_START, records))
        handled = sum(map(_HANDLED, records))
        encoded = sum(map(_ENCODED, records))
        sent = sum(map(_SENT, records))
        validate = sum(map(_VALIDATE, records))
        cache = sum(map(_CACHE, records))
        stages = {
            "decode": start - t0,
            "validate": validate,
            "cache": cache,
            "handler": max(0, handled - start - validate - cache),
            "encode": encoded - handled,
            "compress": sent - encoded,
        }
        for stage, ns in stages.items():
            if ns > 0:
                self._stage_children[stage].inc(ns / 1e9)
                self._sums[stage] += ns
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


_ROW: Final = operator.attrgetter(
    "method", "target", "status", "tool_error", "t0", "handler_start", "handled_at",
    "encoded_at", "sent_at", "validate_ns", "cache_ns",
)  # fmt: skip
_KEY: Final = operator.itemgetter(0, 1)
_OUTCOME: Final = operator.itemgetter(0, 1, 2, 3)
_T0: Final = operator.itemgetter(4)
_START: Final = operator.itemgetter(5)
_HANDLED: Final = operator.itemgetter(6)
_ENCODED: Final = operator.itemgetter(7)
_SENT: Final = operator.itemgetter(8)
_VALIDATE: Final = operator.itemgetter(9)
_CACHE: Final = operator.itemgetter(10)

_EVENT_METRICS: Final = {"cache": "cache", "cache_fallback": "fallbacks", "rejected": "rejected"}
_EVENT_METRICS.update(  # model batching (millimcp.tensor.batching)
    batch="batches", batch_rows="batch_rows", batch_wait="batch_wait", batch_run="batch_run"
)


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
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            if path == self.path or (
                path.endswith(self.path) and path == scope.get("root_path", "") + self.path
            ):
                await self._serve(scope, send)
                return
            await self.app(scope, receive, send)
            return
        if kind == "lifespan":
            await self.app(scope, self._watch_shutdown(receive), send)
            return
        await self.app(scope, receive, send)

    def _watch_shutdown(self, receive: Receive) -> Receive:
        async def watched() -> MutableMapping[str, Any]:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.metrics.probe.ensure_running()
            elif message["type"] == "lifespan.shutdown":
                self.metrics.probe.stop()
            return message

        return watched

    async def endpoint(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The metrics alone, as an ASGI app: mounted as a route of the MCP app itself
        (``Server.asgi``), so MCP calls do not pass through this wrapper."""
        await self._serve(scope, send)

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


def probed(
    lifespan: Callable[[], contextlib.AbstractAsyncContextManager[None]],
) -> Callable[[], contextlib.AbstractAsyncContextManager[None]]:
    """``lifespan`` with the event-loop lag probe (and so the periodic flush) running."""

    @contextlib.asynccontextmanager
    async def run() -> AsyncIterator[None]:
        probe = install().probe
        probe.ensure_running()
        try:
            async with lifespan():
                yield
        finally:
            probe.stop()

    return run
