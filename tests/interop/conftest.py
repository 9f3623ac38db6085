"""Fixtures of the interop tests (helpers: tests/interop/peers.py)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.interop.peers import inspector_argv


@pytest.fixture
def inspector(missing_tool: Any) -> list[str]:
    """argv prefix `node <inspector> --cli`, or skip (fail under `make test`) with the reason."""
    return inspector_argv(missing_tool)
