"""Large raw tensor bodies (``dev.millimcp/tensor`` framing) over real HTTP: a 4 MB body
arrives whole however it is cut, and takes the server no fresh page per request (each
chunk of it used to be a fresh mapping on the native front: about 1,400 minor faults for a
4 MB request, 2 ms of its round trip)."""

from __future__ import annotations

import json
import platform
from collections.abc import AsyncIterator
from typing import Any

import httpx
import numpy as np
import pytest

from millimcp import Client
from millimcp.codec.attachment import frame, split
from millimcp.protocol.types import META_CLIENT_CAPABILITIES
from millimcp.tensor import ATTACHMENT_MEDIA_TYPE, EXTENSION, pack
from millimcp.tensor.wire import unpack
from millimcp.testing import modern_request

X = np.random.default_rng(7).standard_normal(1 << 20).astype(np.float32)  # 4 MB


async def faults(client: Client) -> int:
    result = await client.call_tool("process_faults")
    assert result.structured_content is not None
    return int(result.structured_content["result"])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mmap threshold")
async def test_a_4mb_raw_round_trip_takes_the_server_no_fresh_pages(tensor_url: str) -> None:
    async with Client.over_http(tensor_url, max_attachment_bytes=64 << 20) as client:
        for _ in range(3):  # warm: imports, the first buffers
            await client.call_tool("identity", {"x": X})
        before = await faults(client)
        calls = 8
        for _ in range(calls):
            result = await client.call_tool("identity", {"x": X})
            assert result.tensors is not None
            np.testing.assert_array_equal(result.tensors["result"], X)
            del result
        per_call = (await faults(client) - before) / calls
    # A fresh 4 MB of pages is 1,024 faults (a request took 2,055 before the fix: body and
    # chunks). The calls' own allocations take some: 20-130 seen, more with other suites
    # running beside this one; a quarter of one fresh body is the line.
    assert per_call < 256, per_call


async def test_a_framed_body_sent_in_small_chunked_pieces_arrives_whole(tensor_url: str) -> None:
    """No Content-Length (Transfer-Encoding: chunked), 64 KiB pieces: the body the tool
    reads is every byte that was sent, in order."""
    meta: dict[str, Any] = {META_CLIENT_CAPABILITIES: {"extensions": {EXTENSION: {}}}}
    message, headers = modern_request(
        "tools/call", {"name": "identity", "arguments": {"x": {"uri": "cid:x"}}, "_meta": meta}
    )
    headers["content-type"] = ATTACHMENT_MEDIA_TYPE
    headers["accept"] = f"application/json, {ATTACHMENT_MEDIA_TYPE}"
    body = b"".join(bytes(part) for part in frame(message, pack({"x": X}).parts))

    async def pieces() -> AsyncIterator[bytes]:
        for at in range(0, len(body), 1 << 16):
            yield body[at : at + (1 << 16)]

    async with httpx.AsyncClient(timeout=60) as http:
        response = await http.post(tensor_url, content=pieces(), headers=headers)
    assert response.headers["content-type"] == ATTACHMENT_MEDIA_TYPE
    text, attachment = split(bytearray(response.content), 1 << 20)
    assert json.loads(text)["result"]["content"][0]["uri"] == "cid:result"
    np.testing.assert_array_equal(unpack(attachment, "numpy")["result"], X)
