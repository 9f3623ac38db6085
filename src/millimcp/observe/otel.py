"""OpenTelemetry: a server span per request after the MCP semantic conventions.

- Span name ``{mcp.method.name} {target}`` (the tool or prompt name), or the method alone;
  kind ``SERVER``.
- Parent: the W3C trace context in ``params._meta`` (``traceparent``, ``tracestate``), else
  whatever context is current (an HTTP server instrumentation, say).
- Attributes: ``mcp.method.name``, ``mcp.protocol.version``, ``mcp.session.id`` (from the
  ``Mcp-Session-Id`` header), ``jsonrpc.request.id``, ``gen_ai.tool.name`` and
  ``gen_ai.operation.name`` = ``execute_tool`` (tools/call), ``gen_ai.prompt.name``
  (prompts/get); on failure ``error.type`` (``tool_error`` or the HTTP status) and status
  ERROR. Our own: ``millimcp.cache`` (the cache outcome). The ``network.*`` attributes are
  left to the HTTP server's instrumentation (each attribute costs the SDK ~1 us a span).
- Metric ``mcp.server.operation.duration`` (seconds, histogram) with the low-cardinality
  attributes, when asked for (``install(meter_provider=...)`` or ``metrics=True``): the
  SDK's histogram costs about as much as a span, and Prometheus has the same figure.

The span is current while the handler runs, so :func:`millimcp.observe.downstream` makes
the downstream calls its children. Needs ``opentelemetry-api`` (extra ``otel``); spans go
nowhere until an SDK tracer provider is configured (extra ``otel-sdk``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping
from typing import Any, Final

from millimcp.errors import ConfigurationError
from millimcp.observe import propagate
from millimcp.observe.hook import TRACE, Listener
from millimcp.observe.record import RequestRecord

__all__ = ["OpenTelemetryListener", "install", "uninstall"]

_DURATION_BUCKETS: Final = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
]  # fmt: skip


def _api() -> Any:
    try:
        import opentelemetry.context
        import opentelemetry.metrics
        import opentelemetry.propagate
        import opentelemetry.trace
    except ImportError:
        raise ConfigurationError(
            "OpenTelemetry needs opentelemetry-api: pip install 'millimcp[otel]'"
        ) from None
    return opentelemetry


class OpenTelemetryListener(Listener):
    """Spans and the duration metric from the trace hook; also the propagation bridge."""

    def __init__(
        self, tracer_provider: Any = None, meter_provider: Any = None, metrics: bool | None = None
    ) -> None:
        otel = _api()
        self._otel = otel
        self._trace = otel.trace
        self._context = otel.context
        self._propagate = otel.propagate
        self._server = otel.trace.SpanKind.SERVER
        self._client = otel.trace.SpanKind.CLIENT
        self._error = otel.trace.Status(otel.trace.StatusCode.ERROR)
        self.tracer = otel.trace.get_tracer("millimcp", tracer_provider=tracer_provider)
        self.metrics = meter_provider is not None if metrics is None else metrics
        """Record ``mcp.server.operation.duration`` (the SDK's histogram costs about as
        much as a span: off unless a meter provider is given or ``metrics=True``)."""
        meter = otel.metrics.get_meter("millimcp", meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request duration as observed on the server.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )

    def __repr__(self) -> str:
        return f"<OpenTelemetryListener {self.tracer!r}>"

    # -- the trace hook ----------------------------------------------------------------------

    def started(self, record: RequestRecord) -> None:
        meta = record.meta
        parent = None
        if meta is not None and meta.traceparent is not None:
            carrier = {"traceparent": meta.traceparent}
            if meta.tracestate is not None:
                carrier["tracestate"] = meta.tracestate
            parent = self._propagate.extract(carrier)
        method = record.method
        target = record.target
        attributes: dict[str, Any] = {"mcp.method.name": method}
        if record.request_id is not None:
            attributes["jsonrpc.request.id"] = str(record.request_id)
        if meta is not None and meta.protocol_version is not None:
            attributes["mcp.protocol.version"] = meta.protocol_version
        if method == "tools/call":
            attributes["gen_ai.tool.name"] = target
            attributes["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get":
            attributes["gen_ai.prompt.name"] = target
        session = getattr(record.headers, "session_id", None)  # the transport parsed it
        if session is not None:
            attributes["mcp.session.id"] = session
        span = self.tracer.start_span(
            f"{method} {target}" if target else method,
            context=parent,
            kind=self._server,
            attributes=attributes,
        )
        token = self._context.attach(self._trace.set_span_in_context(span, parent))
        extra = record.extra
        if extra is None:
            record.extra = {"otel": (span, token)}
        else:
            extra["otel"] = (span, token)

    def ended(self, record: RequestRecord) -> None:
        state = record.extra.pop("otel", None) if record.extra is not None else None
        if state is None:
            return
        span, token = state
        # Only what the span or the metric will keep is computed: an unsampled span
        # (ParentBased(TraceIdRatioBased(...)) drops most) costs its end and the detach.
        error = None
        if record.status >= 400:
            error = str(record.status)
        elif record.tool_error:
            error = "tool_error"
        if span.is_recording():
            if error is not None:
                span.set_attribute("error.type", error)
                span.set_status(self._error)
            if record.cache_outcome is not None:
                span.set_attribute("millimcp.cache", record.cache_outcome)
        span.end()
        self._context.detach(token)  # (logs, never raises, if ended in another context)
        if self.metrics:
            attributes: dict[str, Any] = {"mcp.method.name": record.method}
            if record.method == "tools/call":
                attributes["gen_ai.tool.name"] = record.target
            elif record.method == "prompts/get":
                attributes["gen_ai.prompt.name"] = record.target
            if error is not None:
                attributes["error.type"] = error
            self.duration.record(record.total_ns / 1e9, attributes)

    # -- the propagation bridge (millimcp.observe.propagate) ---------------------------------

    def inject(self, headers: MutableMapping[str, str]) -> None:
        self._propagate.inject(headers)

    @contextlib.contextmanager
    def client_span(self, method: str, url: str) -> Iterator[object]:
        attributes = {"http.request.method": method, "url.full": url}
        with self.tracer.start_as_current_span(
            method, kind=self._client, attributes=attributes
        ) as span:
            yield span


_installed: OpenTelemetryListener | None = None


def install(
    tracer_provider: Any = None, meter_provider: Any = None, *, metrics: bool | None = None
) -> OpenTelemetryListener:
    """Trace requests with OpenTelemetry (once per process; later calls return the same
    listener unless arguments are given, which replace it). ``metrics`` records
    ``mcp.server.operation.duration`` too (default: when ``meter_provider`` is given; the
    global meter provider is used with ``metrics=True``)."""
    global _installed
    unchanged = tracer_provider is None and meter_provider is None
    if _installed is not None and unchanged and metrics in (None, _installed.metrics):
        return _installed
    if _installed is not None:
        uninstall()
    _installed = OpenTelemetryListener(tracer_provider, meter_provider, metrics)
    TRACE.add(_installed)
    propagate.set_bridge(_installed)
    return _installed


def uninstall() -> None:
    global _installed
    if _installed is not None:
        TRACE.remove(_installed)
        propagate.set_bridge(None)
        _installed = None
