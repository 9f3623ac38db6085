"""A millimcp server for the client's fault tests (tests/integration/client/test_faults.py).

Run as ``python tests/integration/client/faults_server.py --port N --log FILE``. Every tool
appends one line per event to FILE (``<tool> <event> <monotonic seconds> <pid>``), opened and
closed per line, so the test reads what this process saw even after it was killed. The log also
carries state across a restart on the same port (``once_then_ok`` looks for an earlier start)."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

from millimcp import Server
from millimcp.errors import InternalError, InvalidParams, Overloaded
from millimcp.server.serve import run_app

server = Server("faults-test-server", version="1.0.0")
LOG = Path("faults.log")  # replaced by --log


def record(tool: str, event: str) -> None:
    with LOG.open("a", encoding="utf-8") as log:
        log.write(f"{tool} {event} {time.monotonic():.6f} {os.getpid()}\n")


def seen(tool: str, event: str) -> int:
    if not LOG.exists():
        return 0
    lines = LOG.read_text(encoding="utf-8").splitlines()
    return sum(1 for line in lines if line.split()[:2] == [tool, event])


@server.tool()
async def busy_once() -> str:
    """Refused with HTTP 503 + ``Retry-After: 1`` (-32050) the first time, then answers."""
    record("busy_once", "arrived")
    if seen("busy_once", "arrived") == 1:
        raise Overloaded("busy, come back in a second", {"retryAfterMs": 1000}, retry_after_s=1)
    return "ok"


@server.tool()
async def write_forever(key: str) -> str:
    """Not idempotent: a write that never finishes (the test kills the server meanwhile)."""
    record("write_forever", "started")
    await asyncio.sleep(3600)
    return key


@server.tool(annotations={"idempotentHint": True})
async def put_once_then_ok(key: str) -> str:
    """Idempotent: the first call in the log never finishes (the server is killed during
    it); the next one, on the restarted server, answers at once."""
    record("put_once_then_ok", "started")
    if seen("put_once_then_ok", "started") == 1:
        await asyncio.sleep(3600)
    return f"stored {key}"


@server.tool(timeout=600)
async def stuck() -> str:
    """Never answers; records whether it was cancelled (the client's deadline passed)."""
    record("stuck", "started")
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        record("stuck", "cancelled")
        raise
    finally:
        record("stuck", "finally")
    return "never"


@server.tool(annotations={"readOnlyHint": True})
async def hold(seconds: float) -> str:
    """Holds a call in flight for ``seconds``."""
    record("hold", "started")
    await asyncio.sleep(seconds)
    return "held"


@server.tool()
async def internal_error_write() -> str:
    """Not idempotent: always fails with JSON-RPC -32603 (HTTP 500)."""
    record("internal_error_write", "arrived")
    raise InternalError("the write failed halfway")


@server.tool(annotations={"readOnlyHint": True})
async def internal_error_read() -> str:
    """Read-only: always fails with JSON-RPC -32603 (HTTP 500): retried, then given up."""
    record("internal_error_read", "arrived")
    raise InternalError("the lookup failed")


@server.tool(annotations={"readOnlyHint": True})
async def invalid_params_read() -> str:
    """Read-only, yet its -32602 (HTTP 400) is never retried: the same call fails again."""
    record("invalid_params_read", "arrived")
    raise InvalidParams("order_id must be positive")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    arguments = parser.parse_args()
    LOG = arguments.log
    run_app(server.asgi(), port=arguments.port)
