"""Fixtures of the client tests: a real millimcp server in a subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import pytest

from tests.conftest import free_port, start_server, stop_server


@pytest.fixture(scope="session")
def core_url() -> Iterator[str]:
    """tests/servers/client_core_server.py, run by ``python -m millimcp serve``."""
    port = free_port()
    process = start_server(
        ["-m", "millimcp", "serve", "tests.servers.client_core_server:server", "--port", str(port)],
        port,
    )
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


Era = Literal["modern", "handshake"]


@pytest.fixture(params=["modern", "handshake"])
def era(request: pytest.FixtureRequest) -> Era:
    chosen: Era = request.param
    return chosen
