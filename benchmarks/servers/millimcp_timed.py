"""millimcp with Server-Timing and Prometheus /metrics on (no OpenTelemetry); ``echo``."""

from millimcp import Server, ServerConfig

server = Server(
    "bench", version="1.0.0", config=ServerConfig(server_timing=True, metrics_path="/metrics")
)


@server.tool()
async def echo(text: str) -> str:
    return text


app = server.asgi()
