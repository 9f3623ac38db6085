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

import json
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.interop

INSPECTOR_ENV = "MILLIMCP_INSPECTOR"
NODE_ENV = "MILLIMCP_NODE"
MIN_NODE = (22, 19)  # the package's engines: node >= 22.19.0
TIMEOUT_S = 60


@cache
def _node() -> tuple[str | None, str]:
    """The Node binary to use and, when unusable, why."""
    configured = os.environ.get(NODE_ENV)
    if configured:
        path = Path(configured)
        node = str(path / "node") if path.is_dir() else configured
    else:
        node = shutil.which("node")
        if node is None:
            return None, f"no `node` on PATH and {NODE_ENV} is not set"
    try:
        version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=TIMEOUT_S, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cannot run {node!r}: {exc}"
    match = re.match(r"v(\d+)\.(\d+)\.", version)
    if match is None or (int(match.group(1)), int(match.group(2))) < MIN_NODE:
        need = ".".join(map(str, MIN_NODE))
        return None, f"the Inspector needs Node >= {need}; {node!r} is {version or '?'}"
    return node, ""


@pytest.fixture
def inspector(missing_tool: Any) -> list[str]:
    """argv prefix `node <inspector> --cli`, or skip (fail under `make test`) with the reason."""
    entry = os.environ.get(INSPECTOR_ENV)
    if not entry:
        missing_tool(
            f"{INSPECTOR_ENV} is not set (path to @modelcontextprotocol/inspector@2.12.0's "
            "clients/cli/build/index.js; see this module's docstring)"
        )
    if not Path(entry).is_file():
        missing_tool(f"{INSPECTOR_ENV}={entry!r} is not a file")
    # The Inspector runs only when started by its real path (it compares argv[1] with its
    # own module URL), so a path through a symlinked folder must be resolved.
    entry = os.path.realpath(entry)
    node, why = _node()
    if node is None:
        missing_tool(why)
    return [node, entry, "--cli"]


def _run(inspector: list[str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    node_dir = str(Path(inspector[0]).parent)
    env = {
        **os.environ,
        # Keep the Inspector's catalog/storage/OAuth files out of the real home.
        "HOME": str(home),
        "USERPROFILE": str(home),
        "MCP_CATALOG_PATH": str(home / "catalog.json"),
        "NO_COLOR": "1",
        "PATH": node_dir + os.pathsep + os.environ.get("PATH", ""),
    }
    return subprocess.run(
        [*inspector, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
        check=False,
        cwd=tmp_path,
    )


def _modern_json(
    inspector: list[str], tmp_path: Path, server_url: str, *args: str
) -> dict[str, Any]:
    proc = _run(
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
    assert proc.returncode == 0, (
        f"inspector exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    )
    output = json.loads(proc.stdout)
    assert isinstance(output, dict)
    assert "result" in output, output
    result = output["result"]
    assert isinstance(result, dict)
    return result


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
