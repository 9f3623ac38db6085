"""The official SDK's own high-level example servers (``examples/mcpserver`` of
modelcontextprotocol/python-sdk) through the differential harness: each on mcp 2.3.0 and on
millimcp, one call per tool, read and prompt, compared.

The examples are not copied here: point ``MILLIMCP_COMPAT_SDK_EXAMPLES`` at a checkout's
``examples/mcpserver`` folder. Those that need a desktop, a network or credentials
(``screenshot``, ``text_me``, ``memory``) are left out.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.integration.compat.harness import differences, normalise, served_command, snapshot

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

EXAMPLES = (
    "complex_inputs",
    "desktop",
    "direct_call_tool_result_return",
    "echo",
    "icons_demo",
    "logging_and_progress",
    "parameter_descriptions",
    "readme-quickstart",
    "simple_echo",
    "unicode_example",
    "weather_structured",
)


_NOW = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?")


def _timeless(snapshot: Any) -> Any:
    """``weather_structured`` stamps its results with ``datetime.now()``."""
    return json.loads(_NOW.sub("<now>", json.dumps(snapshot)))


@pytest.mark.parametrize("example", EXAMPLES)
async def test_sdk_example(example: str) -> None:
    folder = os.environ.get("MILLIMCP_COMPAT_SDK_EXAMPLES")
    if not folder:
        pytest.skip("MILLIMCP_COMPAT_SDK_EXAMPLES is not set (a python-sdk examples/mcpserver)")
    server = Path(folder) / f"{example}.py"
    real = await snapshot(served_command(server, shim=False), "auto")
    ours = await snapshot(served_command(server, shim=True), "auto")
    lines = differences(_timeless(normalise(real)), _timeless(normalise(ours)))
    assert not lines, "\n".join(lines)
