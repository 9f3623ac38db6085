"""A 1M-float32 round trip between two processes on one host: shared memory vs the socket.

One millimcp server process (benchmarks/servers/millimcp_tensors.py, uvicorn) and this client
process; each call sends 1,000,000 float32 (4 MB) and gets the same tensor back (the
``roundtrip`` tool). Cases, alternating round by round, all in the same run:

- ``shm``: ``Client.over_http(url, shared_memory="auto")``: the argument is copied once into
  a segment the server maps; the result is copied once into a segment the client maps;
- ``raw``: ``Client.over_http(url)`` (the default): raw bytes in the HTTP bodies
  (``dev.millimcp/tensor`` attachments);
- ``http``: the floor of the socket path: a raw HTTP POST of the 4 MB to a framework-free
  ASGI app that answers the same bytes (aiohttp, no MCP);
- ``bound``: what the shared-memory path should cost at most: a trivial ``tools/call``
  (``ping``, same client) plus two 4 MB memcpys (numpy ``copyto`` into fresh buffers, as the
  segments are fresh), each measured here, in the same rounds.

Reports the median of every case (ms) and the ratios shm / bound and raw / shm.

    .venv/bin/python benchmarks/shared_memory.py --rounds 5 --calls 40
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
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


@contextmanager
def serve(module: str) -> Iterator[str]:
    command = [
        sys.executable, "-m", "uvicorn", f"{module}:app", "--port", "{port}",
        "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip
    env = {"PYTHONPATH": str(BENCH / "servers")}
    with serve_subprocess(command, env=env, stdout=None, timeout=120) as served:
        yield served.url("")


async def measure(mcp_url: str, raw_url: str, rounds: int, calls: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = defaultdict(list)
    async with (
        Client.over_http(mcp_url, shared_memory="auto", max_attachment_bytes=64 << 20) as shm,
        Client.over_http(mcp_url, max_attachment_bytes=64 << 20) as raw,
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

        def memcpy() -> float:
            target = np.empty_like(VECTOR)
            started = time.perf_counter()
            np.copyto(target, VECTOR)
            return time.perf_counter() - started

        for _ in range(3):  # warm up: connections, imports, page tables
            await via(shm), await via(raw), await floor(), await ping()
        for _ in range(rounds):
            for _ in range(calls):
                times["shm"].append(await via(shm))
            for _ in range(calls):
                times["raw"].append(await via(raw))
            for _ in range(calls):
                times["http"].append(await floor())
            for _ in range(calls):
                times["ping"].append(await ping())
                times["memcpy"].append(memcpy())
        first = await shm.call_tool("roundtrip", {"x": VECTOR})
        assert first.tensors is not None
        np.testing.assert_array_equal(first.tensors["result"], VECTOR)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    if not available():
        sys.exit("no /dev/shm on this host: nothing to measure")
    with serve("millimcp_tensors") as mcp_url, serve("raw_tensors") as raw_url:
        times = asyncio.run(measure(mcp_url + "/mcp", raw_url, args.rounds, args.calls))
    ms = {case: statistics.median(values) * 1e3 for case, values in times.items()}
    bound = ms["ping"] + 2 * ms["memcpy"]
    print(f"1M float32 (4 MB) round trip, {args.rounds} rounds x {args.calls} calls, medians")
    print(f"  shm     shared memory (millimcp.Client, shared_memory='auto')  {ms['shm']:7.3f} ms")
    print(f"  raw     raw bytes over HTTP (millimcp.Client, default)        {ms['raw']:7.3f} ms")
    print(f"  http    raw HTTP POST, no MCP (aiohttp)                       {ms['http']:7.3f} ms")
    print(f"  ping    trivial tools/call                                    {ms['ping']:7.3f} ms")
    print(f"  memcpy  one 4 MB copy                                         {ms['memcpy']:7.3f} ms")
    print(f"  bound   ping + 2 memcpy                                       {bound:7.3f} ms")
    print(f"  shm / bound {ms['shm'] / bound:.2f}x   raw / shm {ms['raw'] / ms['shm']:.2f}x")


if __name__ == "__main__":
    main()
