"""millimcp with all observability on: Server-Timing, Prometheus /metrics, OpenTelemetry
spans (SDK tracer provider, batch processor, an exporter that drops what it gets) and the
OpenTelemetry duration metric (SDK meter provider). The same ``echo`` tool.

``BENCH_OTEL_SAMPLE`` (0..1, default 1) samples that share of traces;
``BENCH_OTEL_METRICS=0`` leaves out the OpenTelemetry duration metric.
"""

import os
from collections.abc import Sequence

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from millimcp import Server, ServerConfig
from millimcp.observe import otel


class Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


provider = TracerProvider(
    sampler=ParentBased(TraceIdRatioBased(float(os.environ.get("BENCH_OTEL_SAMPLE", "1"))))
)
provider.add_span_processor(BatchSpanProcessor(Drop()))
otel.install(
    tracer_provider=provider,
    meter_provider=MeterProvider(),
    metrics=os.environ.get("BENCH_OTEL_METRICS", "1") == "1",
)

server = Server(
    "bench",
    version="1.0.0",
    config=ServerConfig(server_timing=True, metrics_path="/metrics", opentelemetry=True),
)


@server.tool()
async def echo(text: str) -> str:
    return text


app = server.asgi()
