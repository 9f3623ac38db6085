"""Real servers from PyPI, unmodified, through the differential harness: each installed
console script on its own framework against the same script on millimcp via
``python -m millimcp.compat run``, both driven by the official mcp 2.3.0 client over stdio.

Two of each flavour, chosen small, with no network or credentials at call time:

* mcp 1.x ``FastMCP`` (on mcp 1.30.0, the last 1.x): ``mcp-server-calculator`` 0.2.1 (pins
  ``mcp<2``) and ``mcp-math`` 0.1.1 (``from mcp.server.fastmcp.server import FastMCP``, does
  not pin ``mcp<2``: on a fresh install it no longer imports; the shim serves it);
* ``MCPServer`` (on mcp 2.3.0): ``mcp-server-time`` 2026.10.19 (server middleware that
  answers an unknown tool with -32602, ``ToolError``, pydantic results; its date and time are
  masked) and ``markitdown-mcp`` 0.0.1a8 (an async tool, ``ToolError`` texts; ``data:`` and
  ``file:`` URIs only);
* fastmcp (on fastmcp 4.2.3): ``mcp-server-calculator-yf`` 0.1.1 (bare ``@mcp.tool``) and
  ``mcp-simple-timeserver`` 3.3.2 (annotations with a title, Sphinx ``:param`` docstrings;
  only its date arithmetic is called: the rest asks NTP or a holiday API). It declares
  ``fastmcp<4``; on fastmcp 3.4.11 the differences are fastmcp 3 to 4 changes (titles from
  names, the docstring split), and the shim follows fastmcp 4.

``excel-mcp-server`` 2.2.2 was tried and left out: it rewrites the SDK's private
``_tool_manager`` records after registering, which the shim does not have.

``make compat-servers`` installs them in ``.tools/compat/``: mcp 1.x with its two servers in
a virtual environment of its own (``MILLIMCP_COMPAT_MCP1_PYTHON``; it cannot share one with
mcp 2.x), and all six with their runtime dependencies, without their framework pins, in a
folder that is put first on the test environment's path (``MILLIMCP_COMPAT_SITE``): there the
``MCPServer`` and fastmcp servers run on the test environment's own mcp 2.3.0 and fastmcp
4.2.3, and every server runs on millimcp. Without them the test skips (fails under ``make
test``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import StdioServerParameters

from tests.conftest import MissingTool
from tests.integration.compat.harness import (
    ROOT,
    Call,
    differences,
    free_port,
    normalise,
    snapshot,
    wait_for,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SITE = "MILLIMCP_COMPAT_SITE"


@dataclass(frozen=True)
class PypiServer:
    """One installed server: its console script and arguments, where its framework is, and
    the calls beyond one generated call per tool (``generated=False``: only these)."""

    script: str
    framework: str | None
    """The variable naming the framework's Python; None: the test environment's own."""
    args: tuple[str, ...] = ()
    calls: tuple[Call, ...] = ()
    generated: bool = True
    timeless: bool = False
    """Its results carry today's date and time: both are replaced before comparing."""


UNKNOWN = Call("tools/call", "no_such_tool")

SERVERS = [
    PypiServer(
        "mcp-server-calculator",
        "MILLIMCP_COMPAT_MCP1_PYTHON",
        calls=(
            Call("tools/call", "calculate", {"expression": "2 * (3 + 4) / 7"}),
            Call("tools/call", "calculate", {"expression": "1 / 0"}),
        ),
    ),
    PypiServer(
        "mcp-math",
        "MILLIMCP_COMPAT_MCP1_PYTHON",
        calls=(
            Call("tools/call", "divide", {"a": 1, "b": 0}),
            Call("tools/call", "add", {"a": "5", "b": 2}),
            Call("tools/call", "factorial", {"n": "x"}),
            Call("tools/call", "sqrt", {"number": -1}),
        ),
    ),
    PypiServer(
        "mcp-server-time",
        None,
        args=("--local-timezone", "Europe/Warsaw"),
        calls=(
            Call("tools/call", "get_current_time", {"timezone": "Asia/Kathmandu"}),
            Call(
                "tools/call",
                "convert_time",
                {"source_timezone": "UTC", "time": "12:30", "target_timezone": "Asia/Tokyo"},
            ),
            Call(
                "tools/call",
                "convert_time",
                {"source_timezone": "UTC", "time": "25:00", "target_timezone": "Asia/Tokyo"},
            ),
            Call("tools/call", "get_current_time", {"timezone": ""}),
            Call("tools/call", "get_current_time", {}),
            UNKNOWN,
        ),
        timeless=True,
    ),
    PypiServer(
        "markitdown-mcp",
        None,
        calls=(
            Call("tools/call", "convert_to_markdown", {"uri": "data:text/html,<h1>Hi</h1>"}),
            Call("tools/call", "convert_to_markdown", {"uri": "data:text/csv,a,b%0A1,2"}),
            Call("tools/call", "convert_to_markdown", {"uri": "file:///no/such/file.txt"}),
            Call("tools/call", "convert_to_markdown", {"uri": "nope:x"}),
        ),
    ),
    PypiServer("mcp-server-calculator-yf", None),
    PypiServer(
        "mcp-simple-timeserver",
        None,
        calls=(
            Call(
                "tools/call",
                "calculate_time_distance",
                {"from_date": "2025-01-15T09:30:00", "to_date": "2025-03-01", "unit": "hours"},
            ),
            Call(
                "tools/call",
                "calculate_time_distance",
                {"from_date": "2025-01-01", "to_date": "2025-03-15", "business_days": True},
            ),
            Call("tools/call", "calculate_time_distance", {"from_date": "x", "to_date": "y"}),
            Call("tools/call", "calculate_time_distance", {"from_date": 3, "to_date": "y"}),
        ),
        generated=False,
    ),
]

_NOW = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([+-]\d\d:\d\d)?|\b[A-Z][a-z]+day\b")


def _timeless(value: Any) -> Any:
    return json.loads(_NOW.sub("<now>", json.dumps(value)))


def _command(argv: list[str], site: str | None) -> StdioServerParameters:
    """``site``: the folder of the servers for the test environment, first on the path."""
    pythonpath = os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONWARNINGS": "ignore"}
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env)


async def _snapshot(server: PypiServer, argv: list[str], site: str | None) -> Any:
    calls: list[Call] | None = None if server.generated else []
    data = await snapshot(_command(argv, site), "legacy", calls, server.calls)
    return _timeless(data) if server.timeless else data


@pytest.mark.parametrize("server", SERVERS, ids=[s.script for s in SERVERS])
async def test_pypi_server(server: PypiServer, missing_tool: MissingTool, tmp_path: Path) -> None:
    site = os.environ.get(SITE)
    if not site or not (Path(site) / "bin" / server.script).exists():
        missing_tool(f"{server.script} is not installed in ${SITE} (make compat-servers)")
        return
    real_site: str | None = site
    if server.framework is None:
        real_argv = [sys.executable, str(Path(site) / "bin" / server.script)]
    else:
        real_site = None
        python = os.environ.get(server.framework)
        script = Path(python).with_name(server.script) if python else None
        if script is None or not script.exists():
            missing_tool(f"{server.script} is not installed beside ${server.framework}")
            return
        real_argv = [str(script)]
    args = [arg.format(tmp=tmp_path) for arg in server.args]
    real_argv += args
    ours_argv = [sys.executable, "-m", "millimcp.compat", "run", server.script, *args]
    real, ours = await asyncio.gather(  # side by side: each start is seconds of imports
        _snapshot(server, real_argv, real_site), _snapshot(server, ours_argv, site)
    )
    assert real["tools"], "the server lists tools"
    lines = differences(normalise(real), normalise(ours))
    assert not lines, "\n".join(lines)


MARKITDOWN_CALLS = [
    Call("tools/call", "convert_to_markdown", {"uri": "data:text/html,<h1>Hi</h1>"}),
    Call("tools/call", "convert_to_markdown", {"uri": "nope:x"}),
]


@pytest.fixture
def markitdown_urls(missing_tool: MissingTool) -> Iterator[tuple[str, str]]:
    """``markitdown-mcp --http`` on mcp 2.3.0 and on millimcp: their Streamable HTTP URLs."""
    site = os.environ.get(SITE)
    script = Path(site) / "bin" / "markitdown-mcp" if site else None
    if site is None or script is None or not script.exists():
        missing_tool(f"markitdown-mcp is not installed in ${SITE} (make compat-servers)")
        return
    pythonpath = os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONWARNINGS": "ignore"}
    ports = [free_port(), free_port()]
    commands = [
        [sys.executable, str(script)],
        [sys.executable, "-m", "millimcp.compat", "run", "markitdown-mcp"],
    ]
    processes = [
        subprocess.Popen(
            [*command, "--http", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for command, port in zip(commands, ports, strict=True)
    ]
    try:
        for process, port in zip(processes, ports, strict=True):
            wait_for(port, process)
        yield f"http://127.0.0.1:{ports[0]}/mcp", f"http://127.0.0.1:{ports[1]}/mcp"
    finally:
        for process in processes:
            process.terminate()
            process.wait(10)


async def test_markitdown_over_http(markitdown_urls: tuple[str, str]) -> None:
    """``markitdown-mcp --http`` builds its own Starlette app from the routes and lifespans
    of ``sse_app()`` and ``streamable_http_app()``, served by uvicorn: on mcp 2.3.0 and on
    millimcp (where the SSE routes answer 501), the Streamable HTTP endpoint looks and
    answers the same in both modes."""
    real_url, our_url = markitdown_urls
    for mode in ("auto", "legacy"):
        real, ours = await asyncio.gather(
            snapshot(real_url, mode, MARKITDOWN_CALLS),
            snapshot(our_url, mode, MARKITDOWN_CALLS),
        )
        assert real["results"][0]["content"][0]["text"] == "# Hi"
        lines = differences(normalise(real), normalise(ours))
        assert not lines, "\n".join(lines)
