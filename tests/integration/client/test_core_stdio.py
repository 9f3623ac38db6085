"""``Client.over_stdio`` in both eras: millimcp's server and the official SDK's as
subprocesses (era detection, calls, progress, input requests, cancellation, subscriptions)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any, Literal

import pytest

from millimcp import Client
from millimcp.client.era import remembered
from millimcp.errors import CallTimeout
from millimcp.protocol.types import ElicitParams
from tests.conftest import ROOT
from tests.integration.client.conftest import Era

MILLIMCP = ["-m", "millimcp", "serve", "tests.servers.client_core_server:server", "--stdio"]
OFFICIAL = ["tests/servers/official_client_peer.py"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


async def _elicit(params: ElicitParams) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


async def test_millimcp_over_stdio(era: Era) -> None:
    progress: list[float] = []
    tag = f"stdio-{era}"
    async with Client.over_stdio(
        sys.executable,
        MILLIMCP,
        env=_env(),
        cwd=str(ROOT),
        era=era,
        elicitation=_elicit,
    ) as client:
        assert client.era == era
        assert "echo" in {tool.name for tool in await client.list_tools()}
        assert (await client.call_tool("echo", {"text": "hé"})).text == "hé"
        result = await client.call_tool(
            "progress", {"steps": 2}, on_progress=lambda p, t, m: progress.append(p)
        )
        assert result.text == "2 steps"
        assert progress == [1.0, 2.0]
        assert (await client.call_tool("ask_name")).text == "hello Ada (accept)"
        with pytest.raises(CallTimeout):
            await client.call_tool("slow", {"seconds": 30, "tag": tag}, timeout=0.3)
        # notifications/cancelled reached the server: its handler saw the cancellation.
        cancelled = await client.call_tool("cancelled")
        assert tag in cancelled.structured_content["result"]
        async with client.subscribe(tools_list_changed=True) as updates:
            await client.call_tool("announce")
            async with asyncio.timeout(10):
                note = await anext(updates)
        assert note.method == "notifications/tools/list_changed"


@pytest.mark.interop
@pytest.mark.parametrize("era", ["auto", "handshake"])
async def test_the_official_server_over_stdio(era: Literal["auto", "handshake"]) -> None:
    async with Client.over_stdio(
        sys.executable,
        OFFICIAL,
        env=_env(),
        cwd=str(ROOT),
        era=era,
        elicitation=_elicit,
    ) as client:
        assert client.era == ("modern" if era == "auto" else "handshake")
        assert (await client.call_tool("echo", {"text": "x"})).text == "x"
        assert (await client.call_tool("count", {"steps": 3})).text == "3 steps"
        if client.era == "handshake":
            assert (await client.call_tool("greet")).text == "hello Ada"


def _everything() -> tuple[str, str] | None:
    """Node and ``@modelcontextprotocol/server-everything`` (a handshake-only server), when
    installed beside the other Node tools (``MILLIMCP_NODE``'s node_modules, or .tools/)."""
    node = os.environ.get("MILLIMCP_NODE")
    if not node:
        return None
    roots = [Path(node).resolve().parents[2], ROOT / ".tools" / "node_modules"]
    for root in roots:
        script = root / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
        if script.is_file():
            return node, str(script)
    return None


@pytest.mark.interop
async def test_a_handshake_only_server_is_detected_and_remembered() -> None:
    found = _everything()
    if found is None:
        pytest.skip("@modelcontextprotocol/server-everything is not installed beside Node")
    node, script = found
    async with Client.over_stdio(node, [script, "stdio"]) as client:
        # server/discover got a non-modern error: the client fell back to initialize.
        assert client.era == "handshake"
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None
        assert "everything" in client.server_info.name
        assert (await client.call_tool("echo", {"message": "hi"})).text == "Echo: hi"
    assert remembered(f"stdio:{node} {script} stdio") == ("handshake", "2025-11-25")


async def test_a_server_that_answers_the_probe_late_is_still_found_modern() -> None:
    """The probe over stdio has a short timeout (a handshake-era server may never answer it);
    a modern server slow to start answers after it and refuses the ``initialize`` fallback:
    the client asks ``server/discover`` again instead of failing."""
    from millimcp import Timeout

    script = str(ROOT / "tests" / "servers" / "slow_modern_stdio.py")
    async with Client.over_stdio(
        sys.executable, [script, "1.0"], timeout=Timeout(total=10.0, connect=0.3)
    ) as client:
        assert client.era == "modern"
        assert client.server_info is not None
        assert client.server_info.name == "slow"
