"""The differential harness, run: each fixture server on its real framework and on millimcp,
both driven by the official mcp 2.3.0 client, must look and answer the same, apart from the
differences listed in ``harness.DELIBERATE``.

The ``MCPServer`` (mcp 2.x) servers run on the mcp 2.3.0 of the test environment. The mcp 1.x
and fastmcp servers need their frameworks in environments of their own (they cannot share
one with mcp 2.3.0): point ``MILLIMCP_COMPAT_MCP1_PYTHON`` / ``MILLIMCP_COMPAT_FASTMCP_PYTHON``
at a Python that has them (``make compat-servers`` makes the first, with mcp 1.30.0; fastmcp
4.2.3 is in the test environment itself: it shares mcp 2.3.0); without one, the server still
runs on millimcp and is checked against the answers recorded from its real framework in
``servers/*.expected.json`` (``MILLIMCP_COMPAT_RECORD=1`` rewrites them from a live run).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.compat.harness import (
    SERVERS,
    Call,
    differences,
    free_port,
    normalise,
    real_command,
    shim_command,
    snapshot,
    wait_for,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

CALLS = [
    Call("tools/call", "calc", {"expression": "1/3"}),
    Call("tools/call", "calc", {"expression": "2**8"}),
    Call("tools/call", "calc", {"digits": 1}),
    Call("tools/call", "add", {"a": "5"}),
    Call("tools/call", "add", {"a": 1, "b": 2}),
    Call("tools/call", "words", {"text": "to be or not"}),
    Call("tools/call", "point", {"x": 1.5}),
    Call("tools/call", "stats", {"values": "[3, 1, 2]"}),
    Call("tools/call", "untyped", {"a": "x"}),
    Call("tools/call", "crash", {"reason": "boom"}),
    Call("tools/call", "pixel"),
    Call("tools/call", "steps", {"n": 2}),
    Call("resources/read", "config://app"),
    Call("resources/read", "users://7/profile"),
    Call("prompts/get", "review", {"code": "x = 1"}),
    Call("prompts/get", "debug", {"error": "KeyError"}),
    Call("tools/call", "no_such_tool"),
]
FASTMCP_CALLS = [
    Call("tools/call", "calc", {"expression": "1/3"}),
    Call("tools/call", "calc", {"expression": "x"}),
    Call("tools/call", "add", {"a": 1}),
    Call("tools/call", "split_words", {"text": "to be"}),
    Call("tools/call", "point", {"x": 1.5}),
    Call("tools/call", "crash", {"reason": "boom"}),
    Call("tools/call", "pixel"),
    Call("tools/call", "steps", {"n": 2}),
    Call("resources/read", "config://app"),
    Call("prompts/get", "review", {"code": "x = 1"}),
]


def _check(real: Any, ours: Any) -> None:
    """The snapshots agree but for ``DELIBERATE``: an unknown tool is an ``isError`` result on
    ``MCPServer`` and JSON-RPC -32602 on millimcp (checked, then set aside)."""
    if CALLS[-1].name == "no_such_tool" and len(real["results"]) == len(CALLS):
        unknown_real, unknown_ours = real["results"].pop(), ours["results"].pop()
        assert unknown_real["isError"] is True
        assert unknown_ours == {"error": -32602}
    lines = differences(normalise(real), normalise(ours))
    assert not lines, "\n".join(lines)


async def test_mcp2_server_over_stdio() -> None:
    server = SERVERS / "calc_mcp2.py"
    real = await snapshot(real_command(server), "auto", CALLS)
    ours = await snapshot(shim_command(server), "auto", CALLS)
    _check(real, ours)


@pytest.fixture
def http_servers() -> Iterator[tuple[str, str]]:
    """calc_mcp2 over Streamable HTTP: on mcp 2.3.0, and on millimcp."""
    runner = Path(__file__).with_name("serve.py")
    processes = []
    urls = []
    for shim in (False, True):
        port = free_port()
        argv = [sys.executable, str(runner), str(SERVERS / "calc_mcp2.py"), str(port)]
        if shim:
            argv.append("--shim")
        processes.append(subprocess.Popen(argv, cwd=str(SERVERS.parents[3])))
        urls.append(f"http://127.0.0.1:{port}/mcp")
    try:
        for process, url in zip(processes, urls, strict=True):
            wait_for(int(url.rsplit(":", 1)[1].split("/")[0]), process)
        yield urls[0], urls[1]
    finally:
        for process in processes:
            process.terminate()
            process.wait(10)


async def test_mcp2_server_over_http(http_servers: tuple[str, str]) -> None:
    real_url, our_url = http_servers
    for mode in ("auto", "legacy"):
        real = await snapshot(real_url, mode, CALLS)
        ours = await snapshot(our_url, mode, CALLS)
        _check(real, ours)


def _framework_python(variable: str, package: str | None = None) -> str | None:
    """The Python that has the real framework: the variable's, else this one when it has
    ``package`` installed (fastmcp 4.2.3 shares mcp 2.3.0 with the test environment)."""
    python = os.environ.get(variable)
    if python and shutil.which(python):
        return python
    if package is not None and importlib.util.find_spec(package) is not None:
        return sys.executable
    return None


@pytest.mark.parametrize(
    ("module", "variable", "package", "calls"),
    [
        ("calc_mcp1", "MILLIMCP_COMPAT_MCP1_PYTHON", None, CALLS),
        ("calc_fastmcp", "MILLIMCP_COMPAT_FASTMCP_PYTHON", "fastmcp", FASTMCP_CALLS),
    ],
)
async def test_other_flavours_over_stdio(
    module: str, variable: str, package: str | None, calls: list[Call]
) -> None:
    server = SERVERS / f"{module}.py"
    expected_file = SERVERS / f"{module}.expected.json"
    python = _framework_python(variable, package)
    if python is not None:
        real = await snapshot(real_command(server, python), "legacy", calls)
        if os.environ.get("MILLIMCP_COMPAT_RECORD"):
            expected_file.write_text(json.dumps(normalise(real), indent=1, sort_keys=True) + "\n")
    else:
        real = json.loads(expected_file.read_text())
    ours = await snapshot(shim_command(server), "legacy", calls)
    _check(real, ours)
