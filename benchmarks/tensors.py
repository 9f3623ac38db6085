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
- (d) millimcp's raw path: ``dev.millimcp/tensor`` (a minimal httpx client; millimcp's own
  client comes with the Client issue);
- (e) the floor: a raw HTTP POST of the same bytes to a framework-free ASGI app (httpx).

Every server is its own uvicorn process (httptools, uvloop, one worker). Cases alternate
round by round; the report gives each case's median over all calls, the bytes on the wire
(request + response bodies) and paired ratios (per round, then the median of the rounds).

    .venv/bin/python benchmarks/tensors.py --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import numpy as np
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import EmbeddedResource, Implementation

from millimcp.codec.attachment import frame, split
from millimcp.tensor import (
    ATTACHMENT_MEDIA_TYPE,
    EXTENSION,
    decode_result,
    encode_arguments,
    unpack,
)

BENCH = Path(__file__).resolve().parent
VERSION = "2026-07-28"
N = 1_000_000
DATA = np.random.default_rng(0).standard_normal(10_000_000).astype(np.float32)
IMAGE = np.random.default_rng(1).random((1, 3, 224, 224), dtype=np.float32)
VECTOR = np.random.default_rng(2).standard_normal(N).astype(np.float32)
WAYS = ("a", "b", "c", "d", "e")
LABELS = {
    "a": "(a) official SDK, JSON lists",
    "b": "(b) official SDK, base64",
    "c": "(c) millimcp, base64 fallback",
    "d": "(d) millimcp, raw (dev.millimcp/tensor)",
    "e": "(e) raw HTTP POST, no MCP",
}
SCENARIOS = ("out-1M", "in-1M", "image")

Call = Callable[[], Awaitable[tuple[np.ndarray, int]]]
"""One timed call: (the rebuilt array, bytes on the wire)."""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(module: str) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(BENCH / "servers")}
    command = [
        sys.executable, "-m", "uvicorn", f"{module}:app", "--port", str(port),
        "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.post(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"{module} did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


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
            mode=VERSION,
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
        return np.array([result.structured_content["result"]])  # type: ignore[index]

    async def in_b64() -> np.ndarray:
        text = base64.b64encode(VECTOR.tobytes()).decode("ascii")
        result = await client.call_tool("in_b64", {"x": text})
        return np.array([result.structured_content["result"]])  # type: ignore[index]

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
        return np.array([result.structured_content["result"]]), wire.bytes - before  # type: ignore[index]

    async def image() -> tuple[np.ndarray, int]:
        before = wire.bytes
        arguments, _ = encode_arguments({"x": IMAGE}, raw=False)
        array = tensor_of(await client.call_tool("infer", arguments))
        return array, wire.bytes - before

    return {("out-1M", "c"): out, ("in-1M", "c"): take, ("image", "c"): image}


def raw_mcp_calls(http: httpx.AsyncClient, url: str) -> dict[tuple[str, str], Call]:
    """(d): millimcp's raw path, with a minimal client speaking the extension."""
    counter = iter(range(1, 1 << 62))

    async def call(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        args, attachment = encode_arguments(arguments, raw=True)
        message = {
            "jsonrpc": "2.0",
            "id": next(counter),
            "method": "tools/call",
            "params": {
                "name": name,
                "arguments": args,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}},
                },
            },
        }
        body: Any = json.dumps(message).encode()
        headers = {
            "Accept": f"application/json, {ATTACHMENT_MEDIA_TYPE}",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,
            "Content-Type": "application/json",
        }
        if attachment is not None:
            headers["Content-Type"] = ATTACHMENT_MEDIA_TYPE
            body = b"".join(frame(body, attachment))
        response = await http.post(url, content=body, headers=headers)
        sent = len(body) + len(response.content)
        if response.headers["content-type"] == ATTACHMENT_MEDIA_TYPE:
            text, data = split(bytearray(response.content), 1 << 20)
            result = json.loads(text)["result"]
            result["__tensors__"] = decode_result(result, data)
        else:
            result = response.json()["result"]
        return result, sent

    async def out() -> tuple[np.ndarray, int]:
        result, sent = await call("out", {"n": N})
        return result["__tensors__"]["result"], sent

    async def take() -> tuple[np.ndarray, int]:
        result, sent = await call("take", {"x": VECTOR})
        return np.array([result["structuredContent"]["result"]]), sent

    async def image() -> tuple[np.ndarray, int]:
        result, sent = await call("infer", {"x": IMAGE})
        return result["__tensors__"]["result"], sent

    return {("out-1M", "d"): out, ("in-1M", "d"): take, ("image", "d"): image}


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


def check(scenario: str, array: np.ndarray) -> None:
    if scenario == "out-1M":
        np.testing.assert_array_equal(array.ravel(), DATA[:N])
    elif scenario == "in-1M":
        assert int(array.ravel()[0]) == N
    else:
        np.testing.assert_allclose(array.ravel(), DATA[:1000] + IMAGE[0, 0, 0, 0], rtol=1e-6)


async def run(rounds: int, calls: int, slow_calls: int, ways: str = "abcde") -> dict[str, Any]:
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
            table: dict[tuple[str, str], Call] = {
                **official_calls(official, official_wire),
                **fallback_calls(fallback, fallback_wire),
                **raw_mcp_calls(http, f"{millimcp_url}/mcp"),
                **floor_calls(http, raw_url),
            }
            table = {key: call for key, call in table.items() if key[1] in ways}
            for key, call in table.items():  # warm up and check every case once
                array, sent = await call()
                check(key[0], array)
                wire[key] = sent
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
        for way in (w for w in "abce" if w in ways):
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
        print(f"  {'way':44} {'median':>10} {'wire':>10} {'vs (d)':>8}")
        for way, row in data["ways"].items():
            ratio = data["ratios"].get(f"{way}/d", 1.0)
            print(
                f"  {LABELS[way]:44} {row['median_ms']:8.2f} ms {row['wire_bytes'] / 1e6:7.2f} MB"
                f" {ratio:7.2f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=10, help="calls per case per round")
    parser.add_argument("--slow-calls", type=int, default=2, help="for (a), JSON lists")
    parser.add_argument("--ways", default="abcde", help="which ways to run, e.g. bde")
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
