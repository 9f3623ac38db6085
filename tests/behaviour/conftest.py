"""One client per (transport, era): the same requirement runs six ways.

- ``memory``: :func:`millimcp.testing.connect`, the server's real HTTP front in-process;
- ``http``: ``python -m millimcp serve`` on 127.0.0.1 (one process for the session) and
  :meth:`Client.over_http`;
- ``stdio``: ``python -m millimcp serve --stdio`` as the client's own subprocess.

Each in ``modern`` (2026-07-28) and ``handshake`` (2025-11-25) era, forced on the client.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from millimcp import Client
from millimcp.protocol.types import CreateMessageResult, ElicitParams, ElicitResult
from millimcp.testing import ServedProcess, connect
from tests.conftest import ROOT, serve_python
from tests.servers.behaviour_server import server

TARGET = "tests.servers.behaviour_server:server"
TRANSPORTS = ("memory", "http", "stdio")
ERAS = ("modern", "handshake")


async def elicit(params: ElicitParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"name": "Ada"})


async def sample(params: Any) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content={"type": "text", "text": "hi"}, model="m")


HANDLERS: dict[str, Any] = {
    "elicitation": elicit,
    "sampling": sample,
    "roots": ["file:///srv/a", "file:///srv/b"],
    "timeout": 20.0,
}


@pytest.fixture(scope="session")
def behaviour_http() -> Iterator[ServedProcess]:
    with serve_python(["-m", "millimcp", "serve", TARGET, "--port", "{port}"]) as served:
        yield served


@pytest.fixture(params=[(t, e) for t in TRANSPORTS for e in ERAS], ids=lambda p: f"{p[0]}-{p[1]}")
async def peer(
    request: pytest.FixtureRequest, behaviour_http: ServedProcess
) -> AsyncIterator[Client]:
    transport, era = request.param
    if transport == "memory":
        async with connect(server, era=era, **HANDLERS) as client:
            yield client
        return
    if transport == "http":
        client = Client.over_http(behaviour_http.url("/mcp"), era=era, **HANDLERS)
    else:
        argv = ["-m", "millimcp", "serve", TARGET, "--stdio"]
        env = {"PYTHONPATH": str(ROOT)}
        client = Client.over_stdio(
            sys.executable, argv, env=env, cwd=str(ROOT), era=era, **HANDLERS
        )
    async with client:
        yield client
