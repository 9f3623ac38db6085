"""`Client.over_stdio` end to end: deadlines cancel on the server, a dying server fails the
call once (never resent), in both eras. The server is tests/integration/client/cancel_server.py."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Literal

import pytest

from millimcp import Client
from millimcp.client.stdio_link import StdioLink
from millimcp.errors import CallTimeout, ConnectionLost, NotSent

ROOT = Path(__file__).resolve().parents[3]
CANCEL_SERVER = str(Path(__file__).resolve().with_name("cancel_server.py"))


def open_client(era: Literal["auto", "modern", "handshake"]) -> Client:
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return Client.over_stdio(
        sys.executable,
        [CANCEL_SERVER],
        env=env,
        era=era,
        timeout=30.0,
    )


def read(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


async def wait_for(path: Path) -> str:
    """The file's text once it exists (after at most 10 s), else ''."""
    for _ in range(200):
        if text := read(path):
            return text
        await asyncio.sleep(0.05)
    return ""


@pytest.mark.parametrize("era", ["auto", "handshake"])
async def test_a_deadline_cancels_the_tool_on_the_server(
    era: Literal["auto", "handshake"], tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    async with open_client(era) as client:
        assert client.era == ("modern" if era == "auto" else "handshake")
        with pytest.raises(CallTimeout):
            await client.call_tool("wait_for_cancel", {"marker": str(marker)}, timeout=0.5)
        assert await wait_for(marker) == "cancelled"
        assert client.stats.timeouts == 1
        assert [tool.name for tool in await client.list_tools()] == ["wait_for_cancel"]


@pytest.mark.parametrize("era", ["auto", "handshake"])
async def test_a_server_that_dies_mid_call_fails_it_once(
    era: Literal["auto", "handshake"], tmp_path: Path
) -> None:
    async with open_client(era) as client:
        call = asyncio.ensure_future(
            client.call_tool("wait_for_cancel", {"marker": str(tmp_path / "never")})
        )
        await client.list_tools()  # the server has read the call by now: lines are in order
        link = client._core.link
        assert isinstance(link, StdioLink)
        pid = link.pid
        assert pid is not None
        os.kill(pid, 9)
        with pytest.raises(ConnectionLost):
            await call
        assert client.stats.retries == 0  # not idempotent: never sent twice
        with pytest.raises(NotSent):
            await client.call_tool("wait_for_cancel", {"marker": str(tmp_path / "never")})
