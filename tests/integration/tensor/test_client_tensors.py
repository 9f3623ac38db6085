"""millimcp's client with tensors: ``call_tool`` takes arrays and tensors, ``.tensors`` holds
the result's, over the raw path (``dev.millimcp/tensor``) and the plain-MCP fallback.

Peers, all real: the millimcp tensor test server (uvicorn subprocess, both eras, and over
stdio), the official ``mcp`` 2.3.0 server returning base64 safetensors blobs (HTTP and stdio),
and a hand-written HTTP server (aiohttp, in the test's loop) that mirrors attachments back or
sends forged ones.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest
import torch
from aiohttp import web

from millimcp import Client, Timeout
from millimcp.client import tensors as client_tensors
from millimcp.codec.attachment import frame, split
from millimcp.errors import FrameTooLarge, TensorFormatError
from millimcp.protocol.types import EmbeddedResource, ResourceLink
from millimcp.tensor import ATTACHMENT_MEDIA_TYPE, EXTENSION, MEDIA_TYPE, pack
from millimcp.tensor.extension import capability
from millimcp.tensor.wire import read_header
from tests.conftest import ROOT, free_port, start_server, stop_server
from tests.integration.interop.peers import tapped_requests, tcp_tap

BIG = 64 << 20
STDIO_TIMEOUT = Timeout(total=60.0, connect=30.0)
"""A stdio server answers its first request once it has imported torch or the SDK: slow when
the machine is busy (the era probe waits ``connect`` seconds)."""
RNG = np.random.default_rng(7)
NUMPY_DTYPES = [
    np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
    np.float16, np.float32, np.float64,
]  # fmt: skip
TORCH_DTYPES = [
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
]  # fmt: skip
SHAPES = [(), (0,), (0, 3), (7,), (2, 3, 4)]


def numpy_cases() -> Iterator[np.ndarray]:
    for dtype in NUMPY_DTYPES:
        for shape in SHAPES:
            yield np.array(RNG.standard_normal(shape) * 50).astype(dtype)
    yield np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]  # not contiguous
    yield np.arange(12, dtype=np.int32).reshape(3, 4).T  # Fortran order
    yield np.arange(5, dtype=">f8")  # big-endian


def torch_cases() -> Iterator[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    for dtype in TORCH_DTYPES:
        for shape in SHAPES:
            yield (torch.randn(shape, generator=generator) * 50).to(dtype)
    yield torch.arange(24, dtype=torch.float32).reshape(4, 6)[:, ::2]
    yield torch.arange(12, dtype=torch.bfloat16).reshape(3, 4).t()


def is_raw(result: Any) -> bool:
    """The result's tensors came as cid: links into an attachment (not base64)."""
    kinds = {type(block) for block in result.content}
    assert kinds in ({ResourceLink}, {EmbeddedResource}), kinds
    return kinds == {ResourceLink}


# -- against the millimcp server ---------------------------------------------------------------


@pytest.mark.usefixtures("http_kind")
@pytest.mark.parametrize("raw", [True, False], ids=["raw", "fallback"])
async def test_every_dtype_and_shape_round_trips(tensor_url: str, raw: bool) -> None:
    async with Client.over_http(tensor_url, tensors=raw, max_message_bytes=BIG) as client:
        assert (EXTENSION in (client.server_capabilities.extensions or {})) is True
        for array in numpy_cases():
            result = await client.call_tool("identity", {"x": array})
            assert not result.is_error, result.text
            assert is_raw(result) is raw
            assert result.tensors is not None
            back = result.tensors["result"]
            assert isinstance(back, np.ndarray)
            assert back.dtype == array.dtype.newbyteorder("<")
            assert back.shape == array.shape
            np.testing.assert_array_equal(back, array)
            assert back.flags.writeable
            assert back.flags.c_contiguous
        for tensor in torch_cases():
            result = await client.call_tool("identity_torch", {"x": tensor})
            assert not result.is_error, result.text
            assert is_raw(result) is raw
            assert result.tensors is not None
            back = result.tensors["result"]
            assert isinstance(back, torch.Tensor)  # torch in, torch out
            assert back.dtype == tensor.dtype
            assert back.shape == tensor.shape
            assert torch.equal(back, tensor)


async def test_the_handshake_era_replies_raw(tensor_url: str) -> None:
    """A handshake-era session that declared the extension in ``initialize`` is raw both
    ways, as a modern request is: its tensor arguments go framed (``cid:`` references into
    the request's attachment) and the tensor reply comes framed."""
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    with tcp_tap(tensor_url) as tap:
        async with Client.over_http(tap.url(), era="handshake") as client:
            assert client.era == "handshake"
            assert EXTENSION in (client.server_capabilities.extensions or {})
            result = await client.call_tool("add", {"a": x, "b": x})
            assert is_raw(result)
            assert result.tensors is not None
            assert torch.equal(result.tensors["result"], x * 2)
    framed_posts = [
        r
        for r in tapped_requests(tap)
        if r.verb == "POST" and r.headers.get("content-type") == ATTACHMENT_MEDIA_TYPE
    ]
    assert len(framed_posts) == 1
    (call,) = framed_posts
    assert "mcp-session-id" in call.headers  # within the handshake-era session
    text, attachment = split(bytearray(call.body), 1 << 20)
    message = json.loads(text)
    assert message["method"] == "tools/call"
    assert message["params"]["arguments"] == {"a": {"uri": "cid:a"}, "b": {"uri": "cid:b"}}
    _, entries, _, _ = read_header(attachment)
    assert sorted(e.name for e in entries) == ["a", "b"]


async def test_dicts_several_results_and_plain_values(tensor_url: str) -> None:
    async with Client.over_http(tensor_url) as client:
        result = await client.call_tool(
            "describe", {"xs": {"a": np.zeros((2, 2), np.int16), "b": np.ones(3, np.float16)}}
        )
        assert result.structured_content == {"a": "int16[2, 2]", "b": "float16[3]"}
        assert result.tensors is None
        result = await client.call_tool("split", {"x": np.arange(9)})
        assert is_raw(result)
        assert result.tensors is not None
        assert list(result.tensors) == ["low", "high", "sum"]
        np.testing.assert_array_equal(result.tensors["low"], np.arange(4))
        np.testing.assert_array_equal(result.tensors["high"], np.arange(4, 9))
        assert result.tensors["sum"].shape == ()
        assert result.tensors["sum"] == 36
        result = await client.call_tool("mixed", {"a": torch.ones(2), "x": np.zeros(2, np.int8)})
        assert result.structured_content == {"a": "torch.float32", "x": "int8"}
        assert (await client.call_tool("maybe", {"x": None})).text == "none"
        result = await client.call_tool("echo", {"text": "plain"})
        assert result.text == "plain"
        assert result.tensors is None


@pytest.mark.usefixtures("http_kind")
async def test_a_million_floats_each_way(tensor_url: str) -> None:
    n = 1_000_000
    expected = np.arange(n, dtype=np.float32) / np.float32(n)
    for raw in (True, False):
        async with Client.over_http(tensor_url, tensors=raw, max_message_bytes=BIG) as client:
            result = await client.call_tool("zeros", {"n": n})
            assert is_raw(result) is raw
            assert result.tensors is not None
            np.testing.assert_array_equal(result.tensors["result"], expected)
            result = await client.call_tool("scale", {"x": expected, "factor": 2.0})
            assert result.tensors is not None
            np.testing.assert_array_equal(result.tensors["result"], expected * 2)


async def test_result_type_follows_the_arguments_or_the_option(tensor_url: str) -> None:
    async with Client.over_http(tensor_url) as client:
        result = await client.call_tool("zeros", {"n": 3})  # no tensor sent: numpy
        assert result.tensors is not None
        assert isinstance(result.tensors["result"], np.ndarray)
        result = await client.call_tool("zeros", {"n": 3}, tensor_type="torch")
        assert result.tensors is not None
        assert isinstance(result.tensors["result"], torch.Tensor)
        result = await client.call_tool("scale", {"x": torch.ones(2)})  # torch in, torch out
        assert result.tensors is not None
        assert isinstance(result.tensors["result"], torch.Tensor)
        result = await client.call_tool("scale", {"x": torch.ones(2)}, tensor_type="numpy")
        assert result.tensors is not None
        assert isinstance(result.tensors["result"], np.ndarray)
        # numpy has no bfloat16: such a tensor comes as torch even when numpy is asked for
        result = await client.call_tool(
            "identity_torch", {"x": torch.ones(2, dtype=torch.bfloat16)}, tensor_type="numpy"
        )
        assert result.tensors is not None
        assert result.tensors["result"].dtype == torch.bfloat16
    async with Client.over_http(tensor_url, tensors=False, tensor_type="torch") as client:
        result = await client.call_tool("zeros", {"n": 3})
        assert not is_raw(result)
        assert result.tensors is not None
        assert isinstance(result.tensors["result"], torch.Tensor)


async def test_a_streamed_reply_falls_back_to_base64(tensor_url: str) -> None:
    """Progress makes the reply an SSE stream: the server sends base64, decoded the same."""
    seen: list[float] = []
    async with Client.over_http(tensor_url) as client:
        result = await client.call_tool(
            "with_progress", {"x": np.arange(3.0)}, on_progress=lambda p, t, m: seen.append(p)
        )
    assert seen == [1]
    assert not is_raw(result)
    assert result.tensors is not None
    np.testing.assert_array_equal(result.tensors["result"], np.arange(3.0) + 1)


async def test_over_stdio_the_fallback_carries_the_same_values() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["-m", "millimcp", "serve", "tests.servers.tensor_server:server", "--stdio"]
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    async with Client.over_stdio(
        sys.executable, args, env=env, cwd=str(ROOT), timeout=STDIO_TIMEOUT
    ) as client:
        result = await client.call_tool("scale", {"x": x, "factor": -1.0})
        assert not is_raw(result)
        assert result.tensors is not None
        np.testing.assert_array_equal(result.tensors["result"], -x)
        result = await client.call_tool("identity_torch", {"x": torch.ones(2, 2).bfloat16()})
        assert result.tensors is not None
        assert torch.equal(result.tensors["result"], torch.ones(2, 2).bfloat16())


def test_calls_without_tensors_import_neither_numpy_nor_torch(tensor_url: str) -> None:
    """Nor millimcp.tensor: a client without tensors never loads the tensor room."""
    script = (
        "import asyncio, sys\n"
        "from millimcp import Client\n"
        "async def main():\n"
        f"    async with Client.over_http({tensor_url!r}) as c:\n"
        "        assert c.server_capabilities.extensions\n"
        "        assert (await c.call_tool('echo', {'text': 'x'})).text == 'x'\n"
        "        assert (await c.call_tool('describe', {'xs': {}})).tensors is None\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in ('numpy', 'torch', 'millimcp.tensor') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_client_spells_the_extension_as_the_tensor_room_does() -> None:
    assert client_tensors.EXTENSION == EXTENSION
    assert client_tensors.MEDIA_TYPE == MEDIA_TYPE
    assert client_tensors.ATTACHMENT_MEDIA_TYPE == ATTACHMENT_MEDIA_TYPE


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    port = free_port()
    process = start_server(["examples/model_server.py", "--port", str(port)], port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


def test_the_example_client_gets_the_same_classes_raw_and_base64(model_url: str) -> None:
    outputs = []
    for extra in ([], ["--base64"]):
        out = subprocess.run(
            [sys.executable, "examples/model_client.py", "--url", model_url, "--calls=2", *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        assert f"2 calls ({'base64' if extra else 'raw'}, 1 at once)" in out
        outputs.append(next(line for line in out.splitlines() if "top-5 classes" in line))
    assert outputs[0] == outputs[1]


# -- against the official SDK's server ---------------------------------------------------------


@pytest.fixture(scope="module")
def official_tensor_url() -> Iterator[str]:
    port = free_port()
    process = start_server(["tests/servers/official_tensor_server.py", "--port", str(port)], port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


async def check_official(client: Client) -> None:
    result = await client.call_tool("ramp", {"n": 5})
    assert result.tensors is not None
    np.testing.assert_array_equal(result.tensors["values"], np.arange(5, dtype=np.float32) / 5)
    np.testing.assert_array_equal(result.tensors["index"], np.arange(5))
    x = RNG.standard_normal(4).astype(np.float32)
    result = await client.call_tool("double", {"x": x})  # our base64 argument, its decoder
    assert not result.is_error, result.text
    assert result.tensors is not None
    np.testing.assert_array_equal(result.tensors["result"], x * 2)


@pytest.mark.interop
async def test_official_server_base64_tensors_decode(official_tensor_url: str) -> None:
    async with Client.over_http(official_tensor_url) as client:
        assert EXTENSION not in (client.server_capabilities.extensions or {})
        await check_official(client)


@pytest.mark.interop
async def test_official_server_over_stdio() -> None:
    command = [str(ROOT / "tests/servers/official_tensor_server.py"), "--stdio"]
    async with Client.over_stdio(sys.executable, command, timeout=STDIO_TIMEOUT) as client:
        await check_official(client)


# -- a hand-written raw peer: byte-level checks and forged replies -----------------------------

Reply = Callable[[dict[str, Any], memoryview | None], tuple[str, bytes]]


class RawPeer:
    """Just enough MCP over HTTP: ``server/discover`` declaring the extension, and tools/call
    answered by ``reply(message, attachment)`` -> (content type, body)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.calls: list[tuple[dict[str, str], dict[str, Any], memoryview | None]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = bytearray(await request.read())
        attachment: memoryview | None = None
        if request.content_type == ATTACHMENT_MEDIA_TYPE:
            text, attachment = split(body, 1 << 20)
            message = json.loads(text)
        else:
            message = json.loads(body)
        if "id" not in message:
            return web.Response(status=202)
        if message["method"] == "server/discover":
            result = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "extensions": {EXTENSION: capability()}},
            }
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})
        self.calls.append((dict(request.headers), message, attachment))
        if message["params"]["name"] == "ok":
            reply = answer(message, [{"type": "text", "text": "ok"}])
            return web.json_response(reply)
        content_type, data = self.reply(message, attachment)
        return web.Response(body=data, headers={"Content-Type": content_type})


@asynccontextmanager
async def raw_peer(reply: Reply) -> AsyncIterator[tuple[RawPeer, str]]:
    peer = RawPeer(reply)
    app = web.Application(client_max_size=BIG)
    app.router.add_post("/mcp", peer.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield peer, f"http://127.0.0.1:{port}/mcp"
    finally:
        await runner.cleanup()


def framed(message: dict[str, Any], attachment: bytes) -> tuple[str, bytes]:
    return ATTACHMENT_MEDIA_TYPE, b"".join(frame(json.dumps(message).encode(), [attachment]))


def answer(message: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": {"content": content}}


def link(name: str) -> dict[str, Any]:
    return {"type": "resource_link", "uri": f"cid:{name}", "name": name, "mimeType": MEDIA_TYPE}


def mirror(message: dict[str, Any], attachment: memoryview | None) -> tuple[str, bytes]:
    """Send the request's attachment back, one link per tensor in it."""
    assert attachment is not None
    _, entries, _, _ = read_header(attachment)
    return framed(answer(message, [link(e.name) for e in entries]), bytes(attachment))


async def test_raw_request_and_reply_at_the_byte_level() -> None:
    a = np.arange(10, dtype=np.float32)
    b = torch.arange(6, dtype=torch.int64).reshape(2, 3)[:, 1:]
    async with raw_peer(mirror) as (peer, url), Client.over_http(url) as client:
        result = await client.call_tool("mirror", {"a": a, "b": b, "n": 3}, tensor_type="numpy")
    ((headers, message, attachment),) = peer.calls
    assert headers["Content-Type"] == ATTACHMENT_MEDIA_TYPE
    assert ATTACHMENT_MEDIA_TYPE in headers["Accept"]
    params = message["params"]
    assert params["arguments"] == {"a": {"uri": "cid:a"}, "b": {"uri": "cid:b"}, "n": 3}
    capabilities = params["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert EXTENSION in capabilities["extensions"]
    assert attachment is not None
    assert len(attachment) >= a.nbytes + 4 * 8
    assert result.tensors is not None
    np.testing.assert_array_equal(result.tensors["a"], a)
    np.testing.assert_array_equal(result.tensors["b"], b.numpy())
    # zero copy: both results are views of the one buffer the reply was read into
    buffer = memory_of(result.tensors["a"])
    assert isinstance(buffer, bytearray)
    assert memory_of(result.tensors["b"]) is buffer
    assert result.tensors["a"].flags.writeable


def memory_of(array: np.ndarray) -> Any:
    """The object at the bottom of an array's chain of bases."""
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base.obj if isinstance(base, memoryview) else base


async def test_without_the_extension_nothing_goes_raw() -> None:
    def base64_only(message: dict[str, Any], attachment: memoryview | None) -> tuple[str, bytes]:
        assert attachment is None
        return "application/json", json.dumps(answer(message, [])).encode()

    async with (
        raw_peer(base64_only) as (peer, url),
        Client.over_http(url, tensors=False) as client,
    ):
        await client.call_tool("t", {"x": np.ones(3, np.float32)})
    ((headers, message, _),) = peer.calls
    assert headers["Content-Type"] == "application/json"
    assert ATTACHMENT_MEDIA_TYPE not in headers["Accept"]
    assert (
        "extensions" not in message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    )
    x = message["params"]["arguments"]["x"]
    assert x["mimeType"] == MEDIA_TYPE
    np.testing.assert_array_equal(
        np.frombuffer(base64.b64decode(x["blob"])[-12:], np.float32), np.ones(3)
    )


def document(header: dict[str, Any], data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data


def forged_reply(case: str) -> Reply:
    def reply(message: dict[str, Any], attachment: memoryview | None) -> tuple[str, bytes]:
        one = {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
        if case == "message length past the end":
            return ATTACHMENT_MEDIA_TYPE, (1 << 40).to_bytes(8, "little") + b"{}      "
        if case == "dtype not allowed":
            doc = document({"x": {"dtype": "O8", "shape": [1], "data_offsets": [0, 8]}}, bytes(8))
            return framed(answer(message, [link("x")]), doc)
        if case == "huge shape, few bytes":
            doc = document({"x": {"dtype": "F32", "shape": [1 << 40], "data_offsets": [0, 4]}}, b"")
            return framed(answer(message, [link("x")]), doc + bytes(4))
        if case == "header length past the end":
            return framed(answer(message, [link("x")]), (1 << 62).to_bytes(8, "little") + b"{}")
        if case == "overlapping tensors":
            two = {**one, "y": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
            return framed(answer(message, [link("x")]), document(two, bytes(12)))
        if case == "booleans not 0 or 1":
            doc = document(
                {"x": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x07"
            )
            return framed(answer(message, [link("x")]), doc)
        if case == "cid names no tensor":
            return framed(answer(message, [link("y")]), document(one, bytes(8)))
        if case == "cid without an attachment":
            return "application/json", json.dumps(answer(message, [link("x")])).encode()
        blob = {"uri": "tensor:x", "mimeType": MEDIA_TYPE}
        if case == "blob not base64":
            blob["blob"] = "!!not base64!!"
        else:  # "forged base64 document"
            blob["blob"] = base64.b64encode(document(one, bytes(3))).decode()
        content = [{"type": "resource", "resource": blob}]
        return "application/json", json.dumps(answer(message, content)).encode()

    return reply


@pytest.mark.parametrize(
    "case",
    [
        "message length past the end",
        "dtype not allowed",
        "huge shape, few bytes",
        "header length past the end",
        "overlapping tensors",
        "booleans not 0 or 1",
        "cid names no tensor",
        "cid without an attachment",
        "blob not base64",
        "forged base64 document",
    ],
)
async def test_forged_replies_raise_tensor_format_error(case: str) -> None:
    async with raw_peer(forged_reply(case)) as (peer, url), Client.over_http(url) as client:
        with pytest.raises(TensorFormatError):
            await client.call_tool("forged", {"x": np.zeros(2, np.float32)}, idempotent=True)
        assert len(peer.calls) == 1  # not retried
        assert (await client.call_tool("ok", {"x": np.zeros(2)})).text == "ok"  # still works


async def test_a_reply_over_the_attachment_cap_is_refused() -> None:
    payload = pack({"x": np.zeros(1024, np.float32)}).tobytes()

    def big(message: dict[str, Any], attachment: memoryview | None) -> tuple[str, bytes]:
        return framed(answer(message, [link("x")]), payload)

    async with (
        raw_peer(big) as (_, url),
        Client.over_http(url, max_attachment_bytes=2048) as client,
    ):
        with pytest.raises(FrameTooLarge):
            await client.call_tool("big", {})
        assert (await client.call_tool("ok", {})).text == "ok"
