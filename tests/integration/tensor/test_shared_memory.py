"""Shared-memory tensors between a client and a server on one host, over real HTTP: both
directions mapped in place, forged references refused, the raw path as the fallback, and
/dev/shm left clean, also when a client is killed mid-call."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import textwrap
import time
from typing import Any

import httpx
import numpy as np
import pytest

from millimcp import Client
from millimcp.codec.attachment import split
from millimcp.protocol.types import META_CLIENT_CAPABILITIES
from millimcp.tensor import ATTACHMENT_MEDIA_TYPE, EXTENSION
from millimcp.tensor.shm import PREFIX, available, create_probe, sweep
from millimcp.testing import modern_request
from tests.conftest import ROOT, shm_segments

pytestmark = [
    pytest.mark.skipif(not available(), reason="no /dev/shm on this host"),
    pytest.mark.usefixtures("clean_dev_shm"),
]


def mapped(array: np.ndarray) -> bool:
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(getattr(base, "obj", None), mmap.mmap)


async def test_tensors_travel_both_ways_through_shared_memory(tensor_url: str) -> None:
    x = np.arange(1 << 20, dtype=np.float32)
    async with Client.over_http(tensor_url, shared_memory="auto") as client:
        result = await client.call_tool("scale", {"x": x, "factor": 3.0})
        assert result.tensors is not None
        y = result.tensors["result"]
        np.testing.assert_array_equal(y, x * 3)
        assert mapped(y)  # a view of the segment the server wrote, not of a message
        assert (await client.call_tool("where", {"x": x})).text == "shm"
        split = await client.call_tool("split", {"x": x[:10]})  # several tensors, one segment
        assert split.tensors is not None
        np.testing.assert_array_equal(split.tensors["high"], x[5:10])
        assert float(split.tensors["sum"]) == 45.0
        del y, result, split
    async with Client.over_http(tensor_url) as plain:  # the default: raw bytes in the message
        assert (await plain.call_tool("where", {"x": x})).text == "message"
        result = await plain.call_tool("scale", {"x": x})
        assert result.tensors is not None
        assert not mapped(result.tensors["result"])


async def test_segments_are_reused_call_after_call_with_no_fresh_page(tensor_url: str) -> None:
    """The server keeps its mapping of the client's argument segment (reading it again takes
    no page fault), and refills the result segment the client let go of before the call."""
    x = np.ones(1 << 20, dtype=np.float32)  # 4 MB: 1,024 pages
    async with Client.over_http(tensor_url, shared_memory="auto") as client:
        first = await client.call_tool("page_faults", {"x": x})
        again = await client.call_tool("page_faults", {"x": x})
        assert first.structured_content is not None
        assert again.structured_content is not None
        assert again.structured_content["result"] < 16, (first.text, again.text)
        maps = []
        for _ in range(3):
            result = await client.call_tool("identity", {"x": x})
            assert result.tensors is not None
            y = result.tensors["result"]
            np.testing.assert_array_equal(y, x)
            maps.append(id(base_map(y)))  # the id: a reference to the map would keep it in use
            del y, result  # let go of: the next result comes in the same segment
        assert maps[0] == maps[1] == maps[2]  # the pooled segments' maps stay alive: ids hold


def base_map(array: np.ndarray) -> Any:
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return getattr(base, "obj", None)


def request(
    arguments: dict[str, Any], offer: dict[str, Any] | None, tool: str = "where"
) -> tuple[bytes, dict[str, str]]:
    declared = {} if offer is None else {"sharedMemory": offer}
    meta = {META_CLIENT_CAPABILITIES: {"extensions": {EXTENSION: declared}}}
    body, headers = modern_request(
        "tools/call", {"name": tool, "arguments": arguments, "_meta": meta}
    )
    headers["accept"] = f"application/json, {ATTACHMENT_MEDIA_TYPE}"
    return body, headers


async def test_forged_references_and_unproven_peers_are_refused(tensor_url: str) -> None:
    probe, token = create_probe()
    valid = {"probe": probe.name, "token": token}
    forged_name = f"{PREFIX}{os.getpid()}-{'d' * 32}"
    cases: list[tuple[dict[str, Any], dict[str, Any] | None, str]] = [
        ({"uri": f"shm:{forged_name}#x", "size": 64}, None, "not agreed"),
        (
            {"uri": f"shm:{forged_name}#x", "size": 64},
            {"probe": probe.name, "token": "00" * 16},
            "not agreed",
        ),
        (
            {"uri": f"shm:{forged_name}#x", "size": 64},
            {"probe": "../../etc/passwd", "token": token},
            "not agreed",
        ),
        ({"uri": f"shm:{forged_name}#x", "size": 64}, valid, "cannot open"),
        ({"uri": "shm:../../etc/passwd#x", "size": 64}, valid, "not a shared-memory segment name"),
        ({"uri": f"shm:{probe.name}#x", "size": 1 << 20}, valid, "holds 16 bytes, the peer said"),
        ({"uri": f"shm:{probe.name}#x", "size": 1 << 40}, valid, "more than"),
        ({"uri": f"shm:{probe.name}#x"}, valid, "positive int"),
    ]
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            for arguments, offer, message in cases:
                body, headers = request({"x": arguments}, offer)
                reply = (await http.post(tensor_url, content=body, headers=headers)).json()
                result = reply["result"]
                assert result["isError"], (arguments, offer)
                assert message in result["content"][0]["text"], (message, result)
            # an unproven offer is not an error: the reply falls back to the raw attachment
            body, headers = request({"n": 8}, {"probe": probe.name, "token": "11" * 16}, "zeros")
            response = await http.post(tensor_url, content=body, headers=headers)
            assert response.headers["content-type"] == ATTACHMENT_MEDIA_TYPE
            text, _ = split(bytearray(response.content), 1 << 20)
            assert json.loads(text)["result"]["content"][0]["uri"].startswith("cid:")
    finally:
        probe.close()


def test_a_client_killed_mid_call_leaks_no_segment(tensor_url: str) -> None:
    """The client sends 4 MB through shared memory to a tool that keeps the model busy for a
    second, and is killed while it waits: its argument segment and the result segment the
    server then makes for it have a dead owner, and the next sweep frees both."""
    caller = textwrap.dedent(f"""
        import asyncio, torch
        from millimcp import Client
        async def main():
            async with Client.over_http({tensor_url!r}, shared_memory="auto") as client:
                print("calling", flush=True)
                await client.call_tool("busy_double", {{"x": torch.ones(1, 1 << 20)}})
        asyncio.run(main())
    """)
    with subprocess.Popen(
        [sys.executable, "-c", caller], stdout=subprocess.PIPE, text=True, cwd=ROOT
    ) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "calling"
            for _ in range(1200):  # until its argument segment exists (a loaded machine: 60 s)
                if any(name.startswith(f"{PREFIX}{process.pid}-") for name in shm_segments()):
                    break
                time.sleep(0.05)
        finally:
            process.kill()
            process.wait(timeout=30)
    time.sleep(2.5)  # the busy model finishes; the server writes the result segment
    left = {name for name in shm_segments() if name.startswith(f"{PREFIX}{process.pid}-")}
    assert left  # the killed client's segments: its argument, the result made for it
    freed = set(sweep())
    assert left <= freed
