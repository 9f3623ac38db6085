"""Framework cost per ``tools/call`` in CPU instructions: deterministic, noise-free.

Server CPU time on a shared 2-core VM swings by 2x from minute to minute; instruction counts
do not. This drives each target's ASGI app in-process (no HTTP server, no sockets: exactly
the work the framework adds on top of the HTTP server) under ``valgrind --tool=callgrind``,
twice with different call counts, and reports the difference per call, so interpreter start,
imports and app construction cancel out:

    .venv/bin/python benchmarks/instructions.py [--targets raw,millimcp,official] [--calls 2000]

Needs valgrind (Debian: ``apt-get install valgrind``). The same request as
``server_overhead.py`` (the 2026-07-28 per-request envelope) is sent every time.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from millimcp.protocol.types import META_CLIENT_INFO
from millimcp.testing import modern_request

HERE = Path(__file__).resolve().parent
TARGETS = {
    "raw": HERE / "servers" / "raw_echo.py",
    "millimcp": HERE / "servers" / "millimcp_echo.py",
    "official": HERE / "servers" / "official_echo.py",
    "fastmcp": HERE / "servers" / "fastmcp_echo.py",
    # Observability on (benchmarks/README.md, "Observability overhead"):
    "millimcp_timed": HERE / "servers" / "millimcp_timed.py",
    "millimcp_observed": HERE / "servers" / "millimcp_observed.py",
    # Server(auth=...), a cached JWT on every request (benchmarks/README.md, "Auth overhead"):
    "millimcp_jwt": HERE / "servers" / "millimcp_jwt.py",
}
BODY, _MCP_HEADERS = modern_request(
    "tools/call",
    {
        "name": "echo",
        "arguments": {"text": "hello"},
        "_meta": {META_CLIENT_INFO: {"name": "bench", "version": "1.0.0"}},
    },
)
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    *((name.encode(), value.encode()) for name, value in _MCP_HEADERS.items()),
    (b"content-length", str(len(BODY)).encode()),
]


async def drive(app: Any, calls: int, extra_headers: Any = ()) -> None:
    """Start the app's lifespan, make ``calls`` requests, check the last, shut down.
    ``extra_headers`` go with every request (a target's ``HEADERS``: ``Authorization``)."""
    lifespan: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()
    stopped = asyncio.Event()

    async def lifespan_send(message: dict[str, Any]) -> None:
        if message["type"].startswith("lifespan.startup"):
            started.set()
        elif message["type"].startswith("lifespan.shutdown"):
            stopped.set()

    lifespan_task = asyncio.ensure_future(
        app(
            {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}},
            lifespan.get,
            lifespan_send,
        )
    )
    await lifespan.put({"type": "lifespan.startup"})
    await asyncio.wait_for(started.wait(), 30)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": [*HEADERS, *extra_headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    body = b""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal body
        if message["type"] == "http.response.body":
            body += message.get("body", b"")

    for _ in range(calls):
        body = b""
        await app(dict(scope), receive, send)
    if b'"hello"' not in body:
        raise SystemExit(f"unexpected response: {body[:300]!r}")
    await lifespan.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(stopped.wait(), 30)
    await lifespan_task


def child(target: str, calls: int) -> None:
    spec = importlib.util.spec_from_file_location(f"bench_{target}", TARGETS[target])
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import uvloop

    uvloop.run(drive(module.app, calls, getattr(module, "HEADERS", ())))


def instructions(target: str, calls: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src"), "PYTHONHASHSEED": "0"}
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                target,
                "--calls",
                str(calls),
            ],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        match = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        if match is None:
            raise SystemExit(f"no summary line in {out}")
        return int(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="raw,millimcp,official")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    per_call: dict[str, float] = {}
    for target in args.targets.split(","):
        low = instructions(target, args.calls // 4)
        high = instructions(target, args.calls)
        per_call[target] = (high - low) / (args.calls - args.calls // 4)
        print(f"{target:10s} {per_call[target]:12,.0f} instructions per tools/call", flush=True)
    if "raw" in per_call:
        floor = per_call["raw"]
        print("\nframework work on top of the raw ASGI floor (in-process, no HTTP server):")
        for target, count in per_call.items():
            print(
                f"  {target:10s} {count / floor:6.1f}x raw   (+{count - floor:,.0f} instructions)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
