"""Interop: the MCP Inspector CLI (2.12.0) against the server at `server_url`, 2026-07-28 era.

Needs a `server_url` fixture (`http://127.0.0.1:PORT/mcp`) for a running server that
exposes the tool `echo(text: str) -> str`.

Setup (CI):

    npm install --prefix /tmp/inspector @modelcontextprotocol/inspector@2.12.0
    INSPECTOR_PKG=/tmp/inspector/node_modules/@modelcontextprotocol/inspector
    export MILLIMCP_INSPECTOR=$INSPECTOR_PKG/clients/cli/build/index.js
    export MILLIMCP_NODE=/path/to/node22/bin/node    # optional; else `node` on PATH

`MILLIMCP_INSPECTOR` may also point at the package's launcher
(`clients/launcher/build/index.js`, the `mcp-inspector` bin); `--cli` is passed
either way. Without it, or without Node >= 22.19, the tests skip.

With `--protocol-era modern` the Inspector pins 2026-07-28 with no fallback: it sends
`server/discover` first and fails (exit 1) unless the result lists 2026-07-28, so a
passing run proves the modern era was used. `--format json` prints exactly one JSON
object on stdout, `{"result": ...}`; failures print `{"error": {"code", "message"}}`
on stderr with a non-zero exit (1 usage/other, 4 unreachable, 5 tool error/not found).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.interop.peers import inspector_argv, inspector_result, run_inspector

pytestmark = pytest.mark.interop


@pytest.fixture
def inspector(missing_tool: Any) -> list[str]:
    """argv prefix `node <inspector> --cli`, or skip (fail under `make test`) with the reason."""
    return inspector_argv(missing_tool)


def _modern_json(
    inspector: list[str], tmp_path: Path, server_url: str, *args: str
) -> dict[str, Any]:
    proc = run_inspector(
        inspector,
        tmp_path,
        "--server-url",
        server_url,
        "--transport",
        "http",
        "--protocol-era",
        "modern",
        "--format",
        "json",
        *args,
    )
    return inspector_result(proc)


def test_inspector_lists_tools(inspector: list[str], tmp_path: Path, server_url: str) -> None:
    result = _modern_json(inspector, tmp_path, server_url, "--method", "tools/list")
    names = [tool["name"] for tool in result["tools"]]
    assert "echo" in names


def test_inspector_calls_echo(inspector: list[str], tmp_path: Path, server_url: str) -> None:
    result = _modern_json(
        inspector,
        tmp_path,
        server_url,
        "--method",
        "tools/call",
        "--tool-name",
        "echo",
        "--tool-arg",
        "text=hi",
    )
    assert result.get("isError") is not True
    texts = [block["text"] for block in result["content"] if block.get("type") == "text"]
    assert texts == ["hi"]
