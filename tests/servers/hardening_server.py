"""The server of the hostile-client tests (tests/integration/hardening), on a chosen front.

``python tests/servers/hardening_server.py --port N [--front uvicorn]``: small tools
(``echo``, ``sleep``, ``mem`` for the process's RSS), the readiness endpoint at
``/healthz``, and limits small enough for tests to reach: a 4 MiB body limit (the
default), 2 s for headers and for an idle connection, a 3 s body timeout, a 5 s grace
period. ``--front`` picks the HTTP front: uvicorn, or millimcp's native one.
"""

from __future__ import annotations

import argparse
import asyncio
import resource

from millimcp import Server, ServerConfig
from millimcp.transports.http import HttpConfig

FRONTS = ("uvicorn", "native")

server = Server("hardening-test-server", config=ServerConfig(state_key=b"h" * 32))

HTTP = HttpConfig(
    health_path="/healthz",
    header_timeout_s=2.0,
    keepalive_timeout_s=2.0,
    body_timeout_s=3.0,
    body_min_rate=16 * 1024,
    linger_s=5.0,
    graceful_timeout_s=5.0,
    max_attachment_bytes=64 * 1024 * 1024,
)


@server.tool()
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


_sleeping = [0]


@server.tool()
async def sleep(ms: int) -> str:
    """Sleep ``ms`` milliseconds, then say so."""
    _sleeping[0] += 1
    try:
        await asyncio.sleep(ms / 1000)
    finally:
        _sleeping[0] -= 1
    return f"slept {ms}"


@server.tool()
async def sleeping() -> int:
    """How many ``sleep`` calls are in progress."""
    return _sleeping[0]


def rss_bytes() -> int:
    """This process's resident set size now (Linux ``/proc``), else its peak."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize()
    except OSError:  # pragma: no cover - not Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@server.tool()
async def mem() -> int:
    """The server's resident set size in bytes."""
    return rss_bytes()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--front", choices=FRONTS, default="uvicorn")
    args = parser.parse_args()
    from millimcp.server.serve import run_app

    run_app(server.asgi(http=HTTP), port=args.port, http=args.front)


if __name__ == "__main__":
    main()
