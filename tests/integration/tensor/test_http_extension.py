"""The ``dev.millimcp/tensor`` extension over real HTTP: raw attachments when both peers declare
it, base64 blobs otherwise, the same values either way, and clear errors for bad input.

The client here is a minimal raw one (httpx): millimcp's own client comes with the Client issue.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import numpy as np
import pytest
import torch

from millimcp.codec.attachment import frame, split
from millimcp.protocol.types import META_CLIENT_CAPABILITIES
from millimcp.tensor import (
    ATTACHMENT_MEDIA_TYPE,
    EXTENSION,
    MEDIA_TYPE,
    decode_result,
    encode_arguments,
)
from millimcp.testing import modern_request


def meta(extension: bool) -> dict[str, Any]:
    """The ``_meta`` entries of a client that does (or does not) declare the extension."""
    capabilities: dict[str, Any] = {"extensions": {EXTENSION: {}}} if extension else {}
    return {META_CLIENT_CAPABILITIES: capabilities}


class TensorRpc:
    """Calls tools with tensor arguments, raw (the extension) or base64 (plain MCP)."""

    def __init__(self, client: httpx.Client, url: str) -> None:
        self.client = client
        self.url = url

    def post(
        self, method: str, params: dict[str, Any], *, raw: bool, extension: bool | None = None
    ) -> httpx.Response:
        params = {**params}
        attachment = params.pop("__attachment__", None)
        params["_meta"] = {
            **meta(raw if extension is None else extension),
            **params.get("_meta", {}),
        }
        body, headers = modern_request(method, params, request_id=7, name=params.get("name"))
        headers["accept"] = f"application/json, text/event-stream, {ATTACHMENT_MEDIA_TYPE}"
        content = body
        if attachment is not None:
            headers["content-type"] = ATTACHMENT_MEDIA_TYPE
            content = b"".join(frame(body, attachment))
        return self.client.post(self.url, content=content, headers=headers)

    def call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        raw: bool,
        to: Literal["numpy", "torch"] = "numpy",
    ) -> tuple[dict[str, Any], dict[str, Any], httpx.Response]:
        """(the JSON-RPC reply, the tensors of its result, the response)."""
        args, attachment = encode_arguments(arguments, raw)
        params: dict[str, Any] = {"name": name, "arguments": args}
        if attachment is not None:
            params["__attachment__"] = attachment
        response = self.post("tools/call", params, raw=raw)
        assert response.status_code == 200, response.text
        kind = response.headers["content-type"]
        if kind.startswith(ATTACHMENT_MEDIA_TYPE):
            message, data = split(bytearray(response.content), 1 << 20)
            reply = json.loads(message)
            return reply, decode_result(reply["result"], data, to), response
        reply = json.loads(response.content)
        return reply, decode_result(reply["result"], None, to), response


@pytest.fixture(scope="module")
def rpc(tensor_url: str) -> Iterator[TensorRpc]:
    with httpx.Client(timeout=60) as client:
        yield TensorRpc(client, tensor_url)


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "base64"])
@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.array(7, dtype=np.int64),
        np.zeros((0, 3), dtype=np.float16),
        np.array([True, False]),
        np.arange(30, dtype=">f8").reshape(5, 6)[::2, ::3],
        np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32),
    ],
    ids=["matrix", "0-d", "empty", "bool", "non-contiguous-big-endian", "image"],
)
def test_arrays_round_trip_both_ways(rpc: TensorRpc, raw: bool, array: np.ndarray) -> None:
    reply, tensors, response = rpc.call("identity", {"x": array}, raw=raw)
    expected = ATTACHMENT_MEDIA_TYPE if raw else "application/json"
    assert response.headers["content-type"] == expected
    back = tensors["result"]
    assert back.shape == array.shape
    assert back.dtype == array.dtype.newbyteorder("<")
    np.testing.assert_array_equal(back, array)
    (block,) = reply["result"]["content"]
    info = block["_meta"][EXTENSION]
    assert info["shape"] == list(array.shape)
    if raw:
        assert block["type"] == "resource_link"
        assert block["uri"] == "cid:result"
    else:
        assert block["type"] == "resource"
        assert block["resource"]["mimeType"] == MEDIA_TYPE


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "base64"])
def test_torch_tensors_and_sync_tools(rpc: TensorRpc, raw: bool) -> None:
    a = torch.randn(4, 5, dtype=torch.float64)
    b = torch.ones(4, 5, dtype=torch.float64)
    _, tensors, _ = rpc.call("add", {"a": a, "b": b}, raw=raw, to="torch")
    assert torch.equal(tensors["result"], a + b)
    half = torch.randn(2, 3).to(torch.bfloat16)
    _, tensors, _ = rpc.call("identity_torch", {"x": half}, raw=raw, to="torch")
    assert torch.equal(tensors["result"], half)


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "base64"])
def test_dicts_of_tensors_in_and_out(rpc: TensorRpc, raw: bool) -> None:
    xs = {"a": np.zeros((2, 2), np.int16), "b": np.ones(3, np.uint8)}
    reply, _, _ = rpc.call("describe", {"xs": xs}, raw=raw)
    assert reply["result"]["structuredContent"] == {"a": "int16[2, 2]", "b": "uint8[3]"}
    x = np.arange(10, dtype=np.float64)
    _, tensors, _ = rpc.call("split", {"x": x}, raw=raw)
    assert set(tensors) == {"low", "high", "sum"}
    np.testing.assert_array_equal(tensors["low"], x[:5])
    np.testing.assert_array_equal(tensors["high"], x[5:])
    assert tensors["sum"].shape == ()
    assert tensors["sum"] == 45.0


def test_a_large_result_travels_raw(rpc: TensorRpc) -> None:
    _, tensors, response = rpc.call("zeros", {"n": 1_000_000}, raw=True)
    assert len(response.content) < 4_000_000 + 1024  # raw bytes, no base64
    np.testing.assert_array_equal(tensors["result"], np.arange(1_000_000, dtype=np.float32) / 1e6)


def test_without_the_extension_the_reply_is_plain_json_even_for_a_raw_request(
    rpc: TensorRpc,
) -> None:
    """A client may send raw tensors yet not take them back: it gets base64."""
    args, attachment = encode_arguments({"x": np.arange(3.0)}, raw=True)
    params = {"name": "scale", "arguments": args, "__attachment__": attachment}
    response = rpc.post("tools/call", params, raw=True, extension=False)
    assert response.headers["content-type"] == "application/json"
    tensors = decode_result(response.json()["result"])
    np.testing.assert_array_equal(tensors["result"], [0.0, 2.0, 4.0])


def test_an_sse_reply_falls_back_to_base64(rpc: TensorRpc) -> None:
    args, attachment = encode_arguments({"x": np.arange(3, dtype=np.int32)}, raw=True)
    params: dict[str, Any] = {
        "name": "with_progress",
        "arguments": args,
        "__attachment__": attachment,
        "_meta": {"progressToken": "p"},
    }
    response = rpc.post("tools/call", params, raw=True)
    assert response.headers["content-type"] == "text/event-stream"
    events = [
        json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")
    ]
    tensors = decode_result(events[-1]["result"])
    np.testing.assert_array_equal(tensors["result"], [1, 2, 3])


def test_optional_tensor_argument(rpc: TensorRpc) -> None:
    reply, _, _ = rpc.call("maybe", {}, raw=False)
    assert reply["result"]["content"][0]["text"] == "none"
    reply, _, _ = rpc.call("maybe", {"x": np.zeros((2, 3))}, raw=True)
    assert reply["result"]["content"][0]["text"] == "(2, 3)"


def test_discover_declares_the_extension_and_schemas_say_tensor(rpc: TensorRpc) -> None:
    discovered = rpc.post("server/discover", {}, raw=False).json()["result"]
    declared = discovered["capabilities"]["extensions"][EXTENSION]
    assert declared["mediaType"] == ATTACHMENT_MEDIA_TYPE
    assert "BF16" in declared["dtypes"]
    tools = {t["name"]: t for t in rpc.post("tools/list", {}, raw=False).json()["result"]["tools"]}
    x = tools["identity"]["inputSchema"]["properties"]["x"]
    assert x["x-millimcp-tensor"] == {"library": "numpy"}
    assert x["properties"]["blob"]["contentMediaType"] == MEDIA_TYPE
    assert tools["identity"]["inputSchema"]["required"] == ["x"]
    assert tools["identity"]["_meta"][EXTENSION] == {"arguments": ["x"], "result": True}
    assert "outputSchema" not in tools["identity"]
    xs = tools["describe"]["inputSchema"]["properties"]["xs"]
    assert xs["additionalProperties"]["x-millimcp-tensor"] == {"library": "numpy"}
    assert "extensions" not in tools["echo"].get("_meta", {})


BAD_ARGUMENTS = {
    "missing cid": {"x": {"uri": "cid:nope"}},
    "not cid": {"x": {"uri": "https://example.com/x"}},
    "neither": {"x": {}},
    "bad base64": {"x": {"blob": "***"}},
    "forged document": {"x": {"blob": "AAAAAAAAAAA="}},
    "not an object": {"x": [1, 2, 3]},
    "wrong mimeType": {"x": {"blob": "AAAAAAAAAAA=", "mimeType": "application/json"}},
}


@pytest.mark.parametrize("arguments", BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS.keys())
def test_bad_tensor_arguments_are_tool_errors(rpc: TensorRpc, arguments: dict[str, Any]) -> None:
    response = rpc.post("tools/call", {"name": "identity", "arguments": arguments}, raw=False)
    result = response.json()["result"]
    assert result["isError"] is True
    assert "Invalid arguments for tool 'identity'" in result["content"][0]["text"]
    assert (
        rpc.call("echo", {"text": "still here"}, raw=False)[0]["result"]["content"][0]["text"]
        == "still here"
    )


def test_a_bfloat16_attachment_for_a_numpy_parameter_is_a_tool_error(rpc: TensorRpc) -> None:
    args, attachment = encode_arguments(
        {"a": torch.ones(2, dtype=torch.bfloat16), "x": torch.ones(2, dtype=torch.bfloat16)}, True
    )
    for name, arguments in (("identity", {"x": args["x"]}), ("mixed", args)):
        # decoded for numpy first (identity), or for torch first and then asked of numpy (mixed)
        params = {"name": name, "arguments": arguments, "__attachment__": attachment}
        result = rpc.post("tools/call", params, raw=True).json()["result"]
        assert result["isError"] is True
        assert "bfloat16" in result["content"][0]["text"]
    reply, _, _ = rpc.call("mixed", {"a": torch.ones(1), "x": np.ones(1, np.int8)}, raw=True)
    assert reply["result"]["structuredContent"] == {"a": "torch.float32", "x": "int8"}


def test_a_forged_attachment_is_a_tool_error(rpc: TensorRpc) -> None:
    params = {"name": "identity", "arguments": {"x": {"uri": "cid:x"}}}
    forged = [(2**40).to_bytes(8, "little") + b"{}"]
    response = rpc.post("tools/call", {**params, "__attachment__": forged}, raw=True)
    result = response.json()["result"]
    assert result["isError"] is True
    assert "header" in result["content"][0]["text"]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"\x01\x02", 400),  # shorter than the length prefix
        ((10**6).to_bytes(8, "little") + b"{}", 400),  # length past the end
        ((2**62).to_bytes(8, "little") + b"{}", 400),  # JSON part over max_body_bytes
    ],
)
def test_broken_framing_is_refused_by_the_transport(
    rpc: TensorRpc, body: bytes, status: int
) -> None:
    _, headers = modern_request("tools/call")
    headers["content-type"] = ATTACHMENT_MEDIA_TYPE
    response = rpc.client.post(rpc.url, content=body, headers=headers)
    assert response.status_code == status
    assert response.json()["error"]["code"] == -32600


def test_an_attachment_over_the_limit_is_413(rpc: TensorRpc) -> None:
    """Refused from the declared length, before 65 MiB are read (the server's limit is 64)."""
    port = int(rpc.url.split(":")[2].split("/")[0])
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: {ATTACHMENT_MEDIA_TYPE}\r\nContent-Length: {65 << 20}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode() + bytes(1024))
        reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 413")
    rpc.call("echo", {"text": "still here"}, raw=False)
