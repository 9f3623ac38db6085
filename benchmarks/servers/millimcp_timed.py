"""millimcp with Server-Timing and Prometheus /metrics on (no OpenTelemetry); ``echo``.

``BENCH_OBSERVE`` picks a part for a breakdown: ``hook`` (a listener that does nothing:
the records alone), ``timing`` (Server-Timing only), ``metrics`` (Prometheus only), or
``both`` (the default).
"""

import os

from millimcp import Server, ServerConfig
from millimcp.observe import TRACE, Listener

part = os.environ.get("BENCH_OBSERVE", "both")
server = Server(
    "bench",
    version="1.0.0",
    config=ServerConfig(
        server_timing=part in ("timing", "both"),
        metrics_path="/metrics" if part in ("metrics", "both") else None,
    ),
)
if part == "hook":
    TRACE.add(Listener())


@server.tool()
async def echo(text: str) -> str:
    return text


app = server.asgi()
