"""Tensors over MCP, end to end on loopback: five ways to move the same float32 bytes.

Scenarios (each call rebuilds a numpy array on the receiving side, checked after timing):

- ``out-1M``: a tool returns 1,000,000 float32 (the client asks with a small request);
- ``in-1M``:  the client sends 1,000,000 float32 (the server answers their count);
- ``image``:  a 1x3x224x224 float32 image in, 1,000 floats out (a classifier's transport).

Ways:

- (a) JSON lists through the official SDK (``mcp`` 2.3.0 server and client): the tensor as
  the JSON text of nested lists out, a ``list[float]`` argument in;
- (b) base64 strings through the official SDK;
- (c) millimcp's plain-MCP fallback: the official client against millimcp (base64 safetensors);
- (d) millimcp's raw path: ``millimcp.Client`` end to end (``call_tool`` with the numpy array,
  ``result.tensors``), which speaks ``dev.millimcp/tensor`` with millimcp's server;
- (e) the floor: a raw HTTP POST of the same bytes to a framework-free ASGI app (httpx);
- (f) the same floor with aiohttp (the HTTP client inside millimcp.Client before its native
  link);
- (g) (d) over millimcp's aiohttp link (``http="aiohttp"``): (g)/(d) is what the native
  HTTP/1.1 link saves.

Every server is its own uvicorn process (httptools, uvloop, one worker). Cases alternate
round by round; the report gives each case's median over all calls, the bytes on the wire
(request + response bodies; for (d), counted at the socket by a relay on one extra call, so
HTTP heads are included: under 1 KB) and paired ratios (per round, then the median of the
rounds).

    .venv/bin/python benchmarks/tensors.py --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import httpx2
import numpy as np
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import EmbeddedResource, Implementation

import millimcp
from millimcp.tensor import encode_arguments, unpack
from millimcp.testing import MODERN_VERSION, serve_subprocess

BENCH = Path(__file__).resolve().parent
N = 1_000_000
DATA = np.random.default_rng(0).standard_normal(10_000_000).astype(np.float32)
IMAGE = np.random.default_rng(1).random((1, 3, 224, 224), dtype=np.float32)
VECTOR = np.random.default_rng(2).standard_normal(N).astype(np.float32)
WAYS = ("a", "b", "c", "d", "e", "f", "g")
LABELS = {
    "a": "(a) official SDK, JSON lists",
    "b": "(b) official SDK, base64",
    "c": "(c) millimcp, base64 fallback",
    "d": "(d) millimcp.Client, raw (dev.millimcp/tensor)",
    "e": "(e) raw HTTP POST, no MCP (httpx)",
    "f": "(f) raw HTTP POST, no MCP (aiohttp)",
    "g": "(g) millimcp.Client, raw, over its aiohttp link",
}
SCENARIOS = ("out-1M", "in-1M", "image")

Call = Callable[[], Awaitable[tuple[np.ndarray, int]]]
"""One timed call: (the rebuilt array, bytes on the wire)."""


@contextmanager
def serve(module: str) -> Iterator[str]:
    command = [
        sys.executable, "-m", "uvicorn", f"{module}:app", "--port", "{port}",
        "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip
    env = {"PYTHONPATH": f"{BENCH.parent / 'src'}{os.pathsep}{BENCH / 'servers'}"}
    with serve_subprocess(command, env=env, stdout=None, timeout=60) as served:
        yield served.url("")


class Wire:
    """Bytes of request and response bodies seen by the official client's HTTP client."""

    def __init__(self) -> None:
        self.bytes = 0

    async def on_request(self, request: httpx2.Request) -> None:
        self.bytes += len(request.content)

    async def on_response(self, response: httpx2.Response) -> None:
        self.bytes += int(response.headers.get("content-length", 0))


async def official_client(stack: AsyncExitStack, url: str, wire: Wire) -> Client:
    http = await stack.enter_async_context(
        httpx2.AsyncClient(
            timeout=httpx2.Timeout(120.0),
            event_hooks={"request": [wire.on_request], "response": [wire.on_response]},
        )
    )
    return await stack.enter_async_context(
        Client(
            streamable_http_client(url, http_client=http),
            mode=MODERN_VERSION,
            cache=None,
            client_info=Implementation(name="bench-tensors", version="0"),
            read_timeout_seconds=120,
        )
    )


def official_calls(client: Client, wire: Wire) -> dict[tuple[str, str], Call]:
    """(a) and (b): the official client and server."""

    def measured(fn: Callable[[], Awaitable[np.ndarray]]) -> Call:
        async def call() -> tuple[np.ndarray, int]:
            before = wire.bytes
            array = await fn()
            return array, wire.bytes - before

        return call

    async def out_list() -> np.ndarray:
        result = await client.call_tool("out_list", {"n": N})
        return np.asarray(json.loads(result.content[0].text), dtype=np.float32)  # type: ignore[union-attr]

    async def out_b64() -> np.ndarray:
        result = await client.call_tool("out_b64", {"n": N})
        return np.frombuffer(base64.b64decode(result.content[0].text), np.float32)  # type: ignore[union-attr]

    async def in_list() -> np.ndarray:
        result = await client.call_tool("in_list", {"x": VECTOR.tolist()})
        return np.array([result.structured_content["result"]])

    async def in_b64() -> np.ndarray:
        text = base64.b64encode(VECTOR.tobytes()).decode("ascii")
        result = await client.call_tool("in_b64", {"x": text})
        return np.array([result.structured_content["result"]])

    async def image_list() -> np.ndarray:
        result = await client.call_tool("infer_list", {"x": IMAGE.ravel().tolist()})
        return np.asarray(json.loads(result.content[0].text), dtype=np.float32)  # type: ignore[union-attr]

    async def image_b64() -> np.ndarray:
        text = base64.b64encode(IMAGE.tobytes()).decode("ascii")
        result = await client.call_tool("infer_b64", {"x": text})
        return np.frombuffer(base64.b64decode(result.content[0].text), np.float32)  # type: ignore[union-attr]

    return {
        ("out-1M", "a"): measured(out_list),
        ("out-1M", "b"): measured(out_b64),
        ("in-1M", "a"): measured(in_list),
        ("in-1M", "b"): measured(in_b64),
        ("image", "a"): measured(image_list),
        ("image", "b"): measured(image_b64),
    }


def fallback_calls(client: Client, wire: Wire) -> dict[tuple[str, str], Call]:
    """(c): the official client against millimcp."""

    def tensor_of(result: Any) -> np.ndarray:
        block = result.content[0]
        assert isinstance(block, EmbeddedResource)
        blob = block.resource.blob  # type: ignore[union-attr]
        (array,) = unpack(bytearray(base64.b64decode(blob))).values()
        return array  # type: ignore[no-any-return]

    async def out() -> tuple[np.ndarray, int]:
        before = wire.bytes
        array = tensor_of(await client.call_tool("out", {"n": N}))
        return array, wire.bytes - before

    async def take() -> tuple[np.ndarray, int]:
        before = wire.bytes
        arguments, _ = encode_arguments({"x": VECTOR}, raw=False)
        result = await client.call_tool("take", arguments)
        return np.array([result.structured_content["result"]]), wire.bytes - before

    async def image() -> tuple[np.ndarray, int]:
        before = wire.bytes
        arguments, _ = encode_arguments({"x": IMAGE}, raw=False)
        array = tensor_of(await client.call_tool("infer", arguments))
        return array, wire.bytes - before

    return {("out-1M", "c"): out, ("in-1M", "c"): take, ("image", "c"): image}


class Relay:
    """A loopback TCP relay that counts the bytes through it, both ways: the wire column of (d),
    whose client (aiohttp, inside millimcp.Client) exposes no byte counts."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.bytes = 0
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self.accept, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        upstream = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            await asyncio.gather(self.pump(reader, upstream[1]), self.pump(upstream[0], writer))
        finally:
            self.tasks.discard(task)

    async def pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with suppress(ConnectionError):
            while chunk := await source.read(1 << 16):
                self.bytes += len(chunk)
                sink.write(chunk)
                await sink.drain()
        sink.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.tasks):
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


def client_calls(client: millimcp.Client, way: str = "d") -> dict[tuple[str, str], Call]:
    """(d): millimcp's own client, raw tensors both ways ((g): over its aiohttp link)."""

    async def out() -> tuple[np.ndarray, int]:
        result = await client.call_tool("out", {"n": N})
        assert result.tensors is not None
        return result.tensors["result"], 0

    async def take() -> tuple[np.ndarray, int]:
        result = await client.call_tool("take", {"x": VECTOR})
        return np.array([result.structured_content["result"]]), 0

    async def image() -> tuple[np.ndarray, int]:
        result = await client.call_tool("infer", {"x": IMAGE})
        assert result.tensors is not None
        return result.tensors["result"], 0

    return {("out-1M", way): out, ("in-1M", way): take, ("image", way): image}


async def client_wire(url: str) -> dict[tuple[str, str], int]:
    """(d)'s bytes on the wire: one call of each scenario through the counting relay."""
    port = int(url.rsplit(":", 1)[1])
    relay = Relay(port)
    wire: dict[tuple[str, str], int] = {}
    try:
        relayed = await relay.start()
        async with millimcp.Client.over_http(f"{relayed}/mcp", timeout=120) as client:
            for key, call in client_calls(client).items():
                before = relay.bytes
                await call()
                wire[key] = relay.bytes - before
    finally:
        await relay.close()
    return wire


def floor_calls(http: httpx.AsyncClient, url: str) -> dict[tuple[str, str], Call]:
    """(e): the same bytes as plain HTTP bodies."""

    async def out() -> tuple[np.ndarray, int]:
        response = await http.post(f"{url}/out?n={N}", content=b"")
        return np.frombuffer(response.content, np.float32), len(response.content)

    async def take() -> tuple[np.ndarray, int]:
        body = VECTOR.tobytes()
        response = await http.post(f"{url}/take", content=body)
        return np.frombuffer(response.content, np.int64), len(body) + len(response.content)

    async def image() -> tuple[np.ndarray, int]:
        body = IMAGE.tobytes()
        response = await http.post(f"{url}/infer", content=body)
        return np.frombuffer(response.content, np.float32), len(body) + len(response.content)

    return {("out-1M", "e"): out, ("in-1M", "e"): take, ("image", "e"): image}


def aiohttp_floor_calls(http: aiohttp.ClientSession, url: str) -> dict[tuple[str, str], Call]:
    """(f): (e) with aiohttp."""

    async def post(path: str, body: bytes) -> bytes:
        async with http.post(f"{url}{path}", data=body) as response:
            return await response.read()

    async def out() -> tuple[np.ndarray, int]:
        data = await post(f"/out?n={N}", b"")
        return np.frombuffer(data, np.float32), len(data)

    async def take() -> tuple[np.ndarray, int]:
        body = VECTOR.tobytes()
        data = await post("/take", body)
        return np.frombuffer(data, np.int64), len(body) + len(data)

    async def image() -> tuple[np.ndarray, int]:
        body = IMAGE.tobytes()
        data = await post("/infer", body)
        return np.frombuffer(data, np.float32), len(body) + len(data)

    return {("out-1M", "f"): out, ("in-1M", "f"): take, ("image", "f"): image}


def check(scenario: str, array: np.ndarray) -> None:
    if scenario == "out-1M":
        np.testing.assert_array_equal(array.ravel(), DATA[:N])
    elif scenario == "in-1M":
        assert int(array.ravel()[0]) == N
    else:
        np.testing.assert_allclose(array.ravel(), DATA[:1000] + IMAGE[0, 0, 0, 0], rtol=1e-6)


async def run(rounds: int, calls: int, slow_calls: int, ways: str = "abcdefg") -> dict[str, Any]:
    samples: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    wire: dict[tuple[str, str], int] = {}
    with (
        serve("official_tensors") as official_url,
        serve("millimcp_tensors") as millimcp_url,
        serve("raw_tensors") as raw_url,
    ):
        async with AsyncExitStack() as stack:
            official_wire, fallback_wire = Wire(), Wire()
            official = await official_client(stack, f"{official_url}/mcp", official_wire)
            fallback = await official_client(stack, f"{millimcp_url}/mcp", fallback_wire)
            http = await stack.enter_async_context(httpx.AsyncClient(timeout=120))
            session = await stack.enter_async_context(aiohttp.ClientSession())
            ours = await stack.enter_async_context(
                millimcp.Client.over_http(f"{millimcp_url}/mcp", timeout=120)
            )
            ours_aiohttp = await stack.enter_async_context(
                millimcp.Client.over_http(f"{millimcp_url}/mcp", timeout=120, http="aiohttp")
            )
            table: dict[tuple[str, str], Call] = {
                **official_calls(official, official_wire),
                **fallback_calls(fallback, fallback_wire),
                **client_calls(ours),
                **client_calls(ours_aiohttp, "g"),
                **floor_calls(http, raw_url),
                **aiohttp_floor_calls(session, raw_url),
            }
            table = {key: call for key, call in table.items() if key[1] in ways}
            for key, call in table.items():  # warm up and check every case once
                array, sent = await call()
                check(key[0], array)
                wire[key] = sent
            wire.update(await client_wire(millimcp_url))
            for scenario in SCENARIOS:
                if (scenario, "g") in wire:
                    wire[scenario, "g"] = wire[scenario, "d"]  # the same bytes on the wire
            for _ in range(rounds):
                for key, call in table.items():
                    times = []
                    for _ in range(slow_calls if key[1] == "a" else calls):
                        started = time.perf_counter()
                        array, _ = await call()
                        times.append(time.perf_counter() - started)
                        check(key[0], array)
                    samples[key].append(times)
    report: dict[str, Any] = {}
    for scenario in SCENARIOS:
        rows = {}
        for way in (w for w in WAYS if w in ways):
            per_round = [statistics.median(t) for t in samples[(scenario, way)]]
            every = [x for t in samples[(scenario, way)] for x in t]
            rows[way] = {
                "median_ms": statistics.median(every) * 1000,
                "round_medians_ms": [m * 1000 for m in per_round],
                "wire_bytes": wire[(scenario, way)],
                "calls": len(every),
            }
        ratios = {}
        for way in (w for w in "abcefg" if w in ways):
            paired = [
                statistics.median(samples[(scenario, way)][r])
                / statistics.median(samples[(scenario, "d")][r])
                for r in range(rounds)
            ]
            ratios[f"{way}/d"] = statistics.median(paired)
        report[scenario] = {"ways": rows, "ratios": ratios}
    return report


def print_report(report: dict[str, Any]) -> None:
    for scenario, data in report.items():
        print(f"\n{scenario}")
        print(f"  {'way':48} {'median':>10} {'wire':>10} {'vs (d)':>8}")
        for way, row in data["ways"].items():
            ratio = data["ratios"].get(f"{way}/d", 1.0)
            print(
                f"  {LABELS[way]:48} {row['median_ms']:8.2f} ms {row['wire_bytes'] / 1e6:7.2f} MB"
                f" {ratio:7.2f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=10, help="calls per case per round")
    parser.add_argument("--slow-calls", type=int, default=2, help="for (a), JSON lists")
    parser.add_argument("--ways", default="abcdefg", help="which ways to run, e.g. bdef")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    if "d" not in args.ways:
        parser.error("--ways must include d: every ratio is against it")
    report = asyncio.run(run(args.rounds, args.calls, args.slow_calls, args.ways))
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
