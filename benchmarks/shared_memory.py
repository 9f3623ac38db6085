"""A 1M-float32 round trip between two processes on one host: shared memory vs the socket.

One millimcp server process (benchmarks/servers/millimcp_tensors.py, uvicorn) and this client
process; each call sends 1,000,000 float32 (4 MB) and gets the same tensor back (the
``roundtrip`` tool). Cases, interleaved call by call (in an order that turns, so that a burst
of load on a shared machine falls on every case alike), all in the same run:

- ``shm``: ``Client.over_http(url, shared_memory="auto")``: the argument is copied once into
  a segment the client keeps (pooled) and the server maps (kept mapped: no fresh page faults);
  the result is copied once into a segment the client keeps for results and maps in place;
- ``raw``: ``Client.over_http(url)`` (the default): raw bytes in the HTTP bodies
  (``dev.millimcp/tensor`` attachments);
- ``http``: the floor of the socket path: a raw HTTP POST of the 4 MB to a framework-free
  ASGI app that answers the same bytes (aiohttp, no MCP);
- ``bound``: what the shared-memory path should cost at most: a trivial ``tools/call``
  (``ping``, same client) plus two 4 MB memcpys (numpy ``copyto`` into a fresh buffer), each
  measured here, in the same rounds;
- ``inplace``: the same bound as one operation: a 4 MB copy in this process, then a trivial
  ``tools/call`` whose tool makes a 4 MB copy in the server (``copy``). The sum of the parts
  above is timed with warm caches; this one pays, as the shared-memory path does, for the
  call's code running after 4 MB went through each process's caches.
- with ``--front native``, ``raw-uvicorn``: ``raw`` against the same server module under
  uvicorn (today's default front); ``raw / shm`` takes the faster of the two raw paths.

Each round's figure is the median of its calls; reported: the median over rounds, the rounds'
range, and the ratios shm / bound and raw / shm paired round by round. Beside the wall time,
the CPU time each call costs, both processes together (this process's ``process_time`` and
the server's threads' ``/proc/<pid>/task/*/schedstat``, read outside the timed span): on a
machine whose cores other work shares, a wall time stretches with the load while the CPU
time does not, so ``cpu shm / cpu bound`` is the figure that a loaded run still shows.
The servers run this checkout's ``src`` (not whatever the environment's install points at).

    .venv/bin/python benchmarks/shared_memory.py --rounds 5 --calls 40
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import numpy as np

from millimcp import Client
from millimcp.tensor.shm import available
from millimcp.testing import serve_subprocess

BENCH = Path(__file__).resolve().parent
N = 1_000_000
VECTOR = np.random.default_rng(2).standard_normal(N).astype(np.float32)
Times = dict[str, list[float]]


@contextmanager
def serve(module: str, front: str = "uvicorn") -> Iterator[tuple[str, int]]:
    """(base url, pid) of a server of ``benchmarks/servers/<module>.py``'s ``app``: under
    uvicorn (httptools, uvloop), or (``front="native"``, a millimcp endpoint app) on
    millimcp's native HTTP/1.1 front (uvloop too)."""
    if front == "native":
        run = f"import {module}; from millimcp.server.serve import run_app; "
        run += f"run_app({module}.app, http='native', port=int(sys.argv[1]))"
        command = [sys.executable, "-c", f"import sys; {run}", "{port}"]
    else:
        command = [
            sys.executable, "-m", "uvicorn", f"{module}:app", "--port", "{port}",
            "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip
    # this checkout's millimcp, not whatever the environment's install points at
    env = {"PYTHONPATH": os.pathsep.join([str(BENCH.parent / "src"), str(BENCH / "servers")])}
    with serve_subprocess(command, env=env, stdout=None, timeout=120) as served:
        yield served.url(""), served.pid


def cpu_of(pid: int) -> float:
    """Seconds of CPU the threads of ``pid`` have run (the scheduler's own count, in ns)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as stats:
                total += int(stats.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended
    return total / 1e9


async def measure(
    mcp: tuple[str, int],
    floor_server: tuple[str, int],
    rounds: int,
    calls: int,
    uvicorn: tuple[str, int] | None = None,
) -> tuple[Times, Times]:
    """Per case, each round's median wall time and median CPU time (seconds)."""
    wall: Times = defaultdict(list)
    cpu: Times = defaultdict(list)
    (mcp_url, mcp_pid), (raw_url, raw_pid) = mcp, floor_server
    mcp_url += "/mcp"
    other = f"{uvicorn[0] if uvicorn else mcp_url.removesuffix('/mcp')}/mcp"
    async with (
        Client.over_http(mcp_url, shared_memory="auto", max_attachment_bytes=64 << 20) as shm,
        Client.over_http(mcp_url, max_attachment_bytes=64 << 20) as raw,
        Client.over_http(other, max_attachment_bytes=64 << 20) as raw_uvicorn,
        aiohttp.ClientSession() as http,
    ):
        body = VECTOR.tobytes()

        async def via(client: Client) -> float:
            started = time.perf_counter()
            result = await client.call_tool("roundtrip", {"x": VECTOR})
            elapsed = time.perf_counter() - started
            assert result.tensors is not None
            assert result.tensors["result"].shape == (N,)
            return elapsed

        async def floor() -> float:
            started = time.perf_counter()
            async with http.post(f"{raw_url}/echo", data=body) as response:
                got = await response.read()
            elapsed = time.perf_counter() - started
            assert len(got) == len(body)
            return elapsed

        async def ping() -> float:
            started = time.perf_counter()
            await shm.call_tool("ping")
            return time.perf_counter() - started

        async def memcpy() -> float:
            target = np.empty_like(VECTOR)
            started = time.perf_counter()
            np.copyto(target, VECTOR)
            return time.perf_counter() - started

        async def inplace() -> float:
            target = np.empty_like(VECTOR)
            started = time.perf_counter()
            np.copyto(target, VECTOR)
            await shm.call_tool("copy")
            return time.perf_counter() - started

        cases: dict[str, tuple[Callable[[], Awaitable[float]], int | None]] = {
            "shm": (lambda: via(shm), mcp_pid),
            "raw": (lambda: via(raw), mcp_pid),
            "http": (floor, raw_pid),
            "ping": (ping, mcp_pid),
            "memcpy": (memcpy, None),
            "inplace": (inplace, mcp_pid),
        }
        if uvicorn is not None:
            cases["raw-uvicorn"] = (lambda: via(raw_uvicorn), uvicorn[1])

        async def one(name: str) -> tuple[float, float]:
            case, server = cases[name]
            server_cpu = cpu_of(server) if server else 0.0
            client_cpu = time.process_time()
            elapsed = await case()
            client_cpu = time.process_time() - client_cpu
            return elapsed, client_cpu + (cpu_of(server) - server_cpu if server else 0.0)

        for _ in range(3):  # warm up: connections, imports, page tables, pooled segments
            for name in cases:
                await one(name)
        names = list(cases)
        for round_ in range(rounds):
            per_round: dict[str, list[tuple[float, float]]] = defaultdict(list)
            for call in range(calls):
                # interleaved, call by call, in an order that turns: a burst of load on the
                # machine falls on every case alike
                shift = (round_ * calls + call) % len(names)
                for name in names[shift:] + names[:shift]:
                    per_round[name].append(await one(name))
            for name, values in per_round.items():
                wall[name].append(statistics.median(w for w, _ in values))
                cpu[name].append(statistics.median(c for _, c in values))
        first = await shm.call_tool("roundtrip", {"x": VECTOR})
        assert first.tensors is not None
        np.testing.assert_array_equal(first.tensors["result"], VECTOR)
    return wall, cpu


def report(title: str, times: Times) -> None:
    """The cases' medians over rounds and the rounds' range (ms); the paired ratios."""
    ms = {case: statistics.median(values) * 1e3 for case, values in times.items()}
    bounds = [p + 2 * m for p, m in zip(times["ping"], times["memcpy"], strict=True)]
    over = [s / b for s, b in zip(times["shm"], bounds, strict=True)]
    over_inplace = [s / b for s, b in zip(times["shm"], times["inplace"], strict=True)]
    raws = times["raw"]
    if "raw-uvicorn" in times:  # the faster raw path of the round
        raws = [min(pair) for pair in zip(raws, times["raw-uvicorn"], strict=True)]
    faster = [r / s for r, s in zip(raws, times["shm"], strict=True)]
    labels = {
        "shm": "shared memory (millimcp.Client, shared_memory='auto')",
        "raw": "raw bytes over HTTP (millimcp.Client, default)",
        "raw-uvicorn": "the same, the server under uvicorn",
        "http": "raw HTTP POST, no MCP (aiohttp)",
        "ping": "trivial tools/call",
        "memcpy": "one 4 MB copy",
        "inplace": "4 MB copy + tools/call copying 4 MB (bound, in one)",
    }
    labels = {case: label for case, label in labels.items() if case in times}
    print(f"{title}: median over rounds, ms (the rounds' range)")
    for case, label in labels.items():
        low, high = min(times[case]) * 1e3, max(times[case]) * 1e3
        print(f"  {case:11} {label:54} {ms[case]:7.3f}  ({low:.3f} - {high:.3f})")
    bound = statistics.median(bounds) * 1e3
    print(f"  {'bound':11} {'ping + 2 memcpy':54} {bound:7.3f}")
    print(
        f"  shm / bound {statistics.median(over):.2f}x ({min(over):.2f} - {max(over):.2f})"
        f"   shm / inplace {statistics.median(over_inplace):.2f}x"
        f" ({min(over_inplace):.2f} - {max(over_inplace):.2f})"
        f"   raw / shm {statistics.median(faster):.2f}x ({min(faster):.2f} - {max(faster):.2f})"
        "   paired by round"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument(
        "--front",
        choices=("native", "uvicorn"),
        default="native",
        help="the HTTP front of the millimcp server (the floor's ASGI app runs under uvicorn)",
    )
    args = parser.parse_args()
    if not available():
        sys.exit("no /dev/shm on this host: nothing to measure")
    load = os.getloadavg()[0]
    with contextlib.ExitStack() as servers:
        mcp = servers.enter_context(serve("millimcp_tensors", args.front))
        floor_server = servers.enter_context(serve("raw_tensors"))
        uvicorn = None
        if args.front != "uvicorn":
            uvicorn = servers.enter_context(serve("millimcp_tensors", "uvicorn"))
        wall, cpu = asyncio.run(measure(mcp, floor_server, args.rounds, args.calls, uvicorn))
    print(
        f"1M float32 (4 MB) round trip, {args.rounds} rounds x {args.calls} calls, interleaved,"
        f" {args.front} front;"
        f" load average {load:.1f} before, {os.getloadavg()[0]:.1f} after, {os.cpu_count()} CPUs"
    )
    report("wall time per call", wall)
    report("CPU time per call, client + server", cpu)


if __name__ == "__main__":
    main()
