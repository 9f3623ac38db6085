"""Framework cost per ``tools/call`` in CPU instructions: deterministic, noise-free.

Server CPU time on a shared 2-core VM swings by 2x from minute to minute; instruction counts
do not. This drives each target's ASGI app in-process (no HTTP server, no sockets: exactly
the work the framework adds on top of the HTTP server) under ``valgrind --tool=callgrind``,
twice with different call counts, and reports the difference per call, so interpreter start,
imports and app construction cancel out:

    .venv/bin/python benchmarks/instructions.py [--targets raw,millimcp,official] [--calls 2000]

Needs valgrind (Debian: ``apt-get install valgrind``). The same request as
``server_overhead.py`` (the 2026-07-28 per-request envelope) is sent every time.

The regression guard (``make perf``, run by CI) is ``--check benchmarks/baselines/
instructions.json``: it fails when a target's count is more than ``--tolerance`` (5%) over
the committed baseline. A change that moves a count on purpose rewrites the baseline with
``--update PATH`` in the same commit.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
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
    # The raw floor plus the typed request decode, the arguments decode and the result
    # encode a typed framework cannot skip (no checks, no context): see the module.
    "typed": HERE / "servers" / "typed_echo.py",
    "millimcp": HERE / "servers" / "millimcp_echo.py",
    "official": HERE / "servers" / "official_echo.py",
    "fastmcp": HERE / "servers" / "fastmcp_echo.py",
    # Observability on (benchmarks/README.md, "Observability overhead"):
    "millimcp_timed": HERE / "servers" / "millimcp_timed.py",
    "millimcp_observed": HERE / "servers" / "millimcp_observed.py",
    # Server(auth=...), a cached JWT on every request (benchmarks/README.md, "Auth overhead"):
    "millimcp_jwt": HERE / "servers" / "millimcp_jwt.py",
    # The same app on the native front, fed request bytes in-process (HTTP parsing included,
    # which the ASGI targets leave to the HTTP server): see drive_native.
    "millimcp_native": HERE / "servers" / "millimcp_echo.py",
    # millimcp_jwt's server on the native front (its auth rules without the ASGI gate).
    "millimcp_native_jwt": HERE / "servers" / "millimcp_jwt.py",
    # The client side: Client.over_http (native link) at 32 calls in flight over an in-process
    # loopback network that answers from canned bytes (benchmarks/client_loopback.py).
    "client": HERE / "client_loopback.py",
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


class _Transport:
    """The least of an asyncio transport the native front writes to."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.wrote = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.written.append(data)
        self.wrote.set()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None: ...


async def drive_native(app: Any, calls: int, extra: Any = ()) -> None:
    """``calls`` requests as bytes through one native connection, answered one by one."""
    from millimcp.transports.native.connection import HttpConnection
    from millimcp.transports.native.server import endpoint_of, make_front

    served = endpoint_of(app)
    assert served is not None
    front = make_front(*served, asyncio.get_running_loop())
    conn = HttpConnection(front)
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    request = (
        b"POST /mcp HTTP/1.1\r\n"
        + b"".join(b"%s: %s\r\n" % pair for pair in [*HEADERS, *extra])
        + b"\r\n"
        + BODY
    )
    for _ in range(calls):
        transport.wrote.clear()
        conn.data_received(request)
        await transport.wrote.wait()
        await asyncio.sleep(0)  # the request's task finishes; the connection is idle again
    if b'"hello"' not in transport.written[-1]:
        raise SystemExit(f"unexpected response: {transport.written[-1][:300]!r}")


def child(target: str, calls: int) -> None:
    if target == "client":
        sys.path.insert(0, str(HERE))
        from client_loopback import run

        run(calls, 32)
        return
    sys.path.insert(0, str(TARGETS[target].parent))  # a server may import its neighbours
    spec = importlib.util.spec_from_file_location(f"bench_{target}", TARGETS[target])
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import uvloop

    if target.startswith("millimcp_native"):
        uvloop.run(drive_native(module.app, calls, getattr(module, "HEADERS", ())))
    else:
        uvloop.run(drive(module.app, calls, getattr(module, "HEADERS", ())))


def callgrind_count(script: str, *args: str) -> int:
    """Instructions ``python script *args`` executes under callgrind (this checkout's
    ``src`` first on the path, a fixed hash seed), its output discarded."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src"), "PYTHONHASHSEED": "0"}
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                script,
                *args,
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


def instructions(target: str, calls: int) -> int:
    return callgrind_count(__file__, "--child", target, "--calls", str(calls))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="raw,millimcp,official")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--check", type=Path, metavar="BASELINE", help="fail past the baseline")
    parser.add_argument("--update", type=Path, metavar="BASELINE", help="write the baseline")
    parser.add_argument("--tolerance", type=float, default=0.05, help="allowed growth (0.05)")
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
    if args.update is not None:
        args.update.parent.mkdir(parents=True, exist_ok=True)
        counts = {target: round(count) for target, count in per_call.items()}
        args.update.write_text(json.dumps({"calls": args.calls, "per_call": counts}, indent=2))
        print(f"baseline written: {args.update}")
    if args.check is not None:
        return check(per_call, args.check, args.tolerance)
    if "raw" in per_call:
        floor = per_call["raw"]
        print("\nframework work on top of the raw ASGI floor (in-process, no HTTP server):")
        for target, count in per_call.items():
            print(
                f"  {target:10s} {count / floor:6.1f}x raw   (+{count - floor:,.0f} instructions)"
            )
    return 0


def check(per_call: dict[str, float], path: Path, tolerance: float) -> int:
    """1 when a measured count is more than ``tolerance`` over the baseline at ``path``."""
    baseline: dict[str, int] = json.loads(path.read_text())["per_call"]
    failed = False
    for target, count in per_call.items():
        if target not in baseline:
            print(f"  {target:16s} no baseline (add it with --update)")
            continue
        growth = count / baseline[target] - 1
        verdict = "FAIL" if growth > tolerance else "ok"
        failed = failed or growth > tolerance
        print(
            f"  {target:16s} {count:10,.0f} vs baseline {baseline[target]:10,} "
            f"({growth:+.1%}, limit +{tolerance:.0%}): {verdict}"
        )
    if failed:
        print(f"instruction count grew past the baseline; if on purpose: --update {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
