"""The hostile-client tests' fixtures: a started server on each HTTP front.

Every test here takes ``front`` (a :class:`Front`: its URL, port and process) and so runs
once per front in :data:`FRONTS`. A second front joins by adding its name to
:data:`FRONTS` and a way to start it to ``tests/servers/hardening_server.py --front NAME``
(the same tools and :class:`~millimcp.transports.http.HttpConfig`): each test then runs on
both, unchanged.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from millimcp.testing.processes import ServedProcess
from tests.conftest import serve_python
from tests.integration.http.conftest import Rpc

FRONTS = ("uvicorn", "native")
"""The HTTP fronts every hostile-client test runs on."""

SERVER = "tests/servers/hardening_server.py"
LIMIT = 4 * 1024 * 1024
"""The server's ``max_body_bytes`` (HttpConfig's default)."""


@dataclass(frozen=True)
class Front:
    """A started server: where it listens, and its process."""

    name: str
    served: ServedProcess

    @property
    def url(self) -> str:
        return self.served.url()

    @property
    def port(self) -> int:
        return self.served.port

    def connect(self) -> socket.socket:
        """A raw TCP connection to the server (for clients that misbehave on purpose)."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def works(self) -> None:
        """The server still answers a normal call (on a new connection)."""
        with httpx.Client(timeout=30) as client:
            Rpc(client, self.url).works()

    def rss(self) -> int:
        """The server process's resident set size, from /proc (Linux)."""
        with open(f"/proc/{self.served.pid}/statm") as statm:
            return int(statm.read().split()[1]) * 4096


def start_front(name: str) -> Iterator[Front]:
    with serve_python([SERVER, "--port", "{port}", "--front", name]) as served:
        yield Front(name, served)


@pytest.fixture(scope="module", params=FRONTS)
def front(request: pytest.FixtureRequest) -> Iterator[Front]:
    """One server per front for a test module (shared by its tests)."""
    yield from start_front(str(request.param))


@pytest.fixture(params=FRONTS)
def fresh_front(request: pytest.FixtureRequest) -> Iterator[Front]:
    """A server of its own for one test (one that stops it, for instance)."""
    yield from start_front(str(request.param))
