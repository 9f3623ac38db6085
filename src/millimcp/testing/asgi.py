"""Driving an ASGI app in-process: the scope of one HTTP request."""

from __future__ import annotations

from typing import Any

__all__ = ["http_scope"]

_BASE_HEADERS = (
    (b"host", b"127.0.0.1:8000"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
)


def http_scope(
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    method: str = "POST",
    path: str = "/mcp",
) -> dict[str, Any]:
    """An ASGI ``http`` scope as uvicorn would build it for a request from 127.0.0.1.

    ``headers`` (lower-case names) come after Host, Content-Type and Accept; a name given
    again there wins, as the server reads the last value.
    """
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [*_BASE_HEADERS, *(headers or [])],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
