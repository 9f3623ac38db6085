"""Fixtures of the client's unit tests: servers in this process, reached in memory."""

from __future__ import annotations

from typing import Literal

import pytest

from millimcp import Server
from tests.servers import client_core_server

Era = Literal["modern", "handshake"]


@pytest.fixture
def core_server() -> Server:
    """tests/servers/client_core_server.py's server (its counters live in this process)."""
    return client_core_server.server


@pytest.fixture(params=["modern", "handshake"])
def era(request: pytest.FixtureRequest) -> Era:
    chosen: Era = request.param
    return chosen
