"""Real servers from PyPI, unmodified, through the differential harness: each installed
console script on its own framework, in an environment of its own, against the same script
on millimcp via ``python -m millimcp.compat run`` in the test environment.

Chosen small, with no network or credentials at call time:

* ``mcp-server-calculator`` 0.2.1 (mcp 1.x ``FastMCP``, pins ``mcp<2``: on a fresh mcp 2.x
  install it no longer imports; the shim serves it);
* ``mcp-server-calculator-yf`` 0.1.1 (fastmcp, bare ``@mcp.tool``).

They are not test dependencies. Set ``MILLIMCP_COMPAT_MCP1_PYTHON`` /
``MILLIMCP_COMPAT_FASTMCP_PYTHON`` to Pythons where each is installed with its framework, and
install each here with ``pip install --no-deps`` (plus ``requests``, which the second
imports). Without them the test skips.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from mcp.client.stdio import StdioServerParameters

from tests.integration.compat.harness import ROOT, differences, normalise, snapshot

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SERVERS = [
    ("mcp-server-calculator", "mcp_server_calculator", "MILLIMCP_COMPAT_MCP1_PYTHON"),
    ("mcp-server-calculator-yf", "mcp_server_stat", "MILLIMCP_COMPAT_FASTMCP_PYTHON"),
]


def _command(argv: list[str]) -> StdioServerParameters:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env)


@pytest.mark.parametrize(("script", "module", "variable"), SERVERS)
async def test_pypi_server(script: str, module: str, variable: str) -> None:
    python = os.environ.get(variable)
    real_script = Path(python).with_name(script) if python else None
    if real_script is None or not real_script.exists():
        pytest.skip(f"{script} is not installed beside ${variable}")
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{script} is not installed in the test environment")
    real = await snapshot(_command([str(real_script)]), "legacy")
    ours = await snapshot(
        _command([sys.executable, "-m", "millimcp.compat", "run", script]), "legacy"
    )
    assert real["tools"], "the server lists tools"
    lines = differences(normalise(real), normalise(ours))
    assert not lines, "\n".join(lines)
