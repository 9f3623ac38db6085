"""The client under faults, against a real millimcp server process (issue 6, "Done when").

The server (tests/integration/client/faults_server.py) logs every arrival, start and
cancellation of its tools to a file with its own monotonic clock, so what the *server* saw is
asserted: how many times a call arrived, the gap between two arrivals, whether a handler was
cancelled. The server is killed with SIGKILL mid-call and restarted on the same port where a
test needs it; a wrong retry of a non-idempotent call would then reach the new process and be
counted."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from millimcp import Client, Limits, Retry
from millimcp.client import http_choice
from millimcp.errors import (
    CallTimeout,
    ConnectionLost,
    InternalError,
    InvalidParams,
    QueueFull,
)
from millimcp.protocol.types import TextContent
from tests.conftest import free_port, start_server, stop_server

pytestmark = pytest.mark.usefixtures("http_kind")

SERVER = "tests/integration/client/faults_server.py"


@dataclass
class FaultServer:
    """One faults_server.py process on a fixed port, which can be killed and restarted."""

    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.process = start_server(
            [SERVER, "--port", str(self.port), "--log", str(self.log)], self.port
        )

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            stop_server(self.process)
            self.process = None

    def events(self, tool: str, event: str) -> list[float]:
        """The server's monotonic times of ``event`` for ``tool``, in order."""
        if not self.log.exists():
            return []
        times = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            name, what, at, _pid = line.split()
            if (name, what) == (tool, event):
                times.append(float(at))
        return times

    async def wait_for(self, tool: str, event: str, count: int = 1, within: float = 20) -> None:
        """Until the server logged ``count`` of ``event`` (a generous bound, not a timing)."""
        give_up = time.monotonic() + within
        while len(self.events(tool, event)) < count:
            if time.monotonic() > give_up:
                raise AssertionError(f"the server never logged {count} x {tool} {event}")
            await asyncio.sleep(0.02)


def make_server(tmp_path: Path) -> Iterator[FaultServer]:
    server = FaultServer(free_port(), tmp_path / "faults.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", params=["native", "aiohttp"])
def http_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """The HTTP link, per module here: the shared server's tools keep state (``busy_once``)
    and its log counts arrivals, so each link gets a server of its own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(http_choice, "DEFAULT", request.param)
        yield request.param


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, http_kind: str) -> Iterator[FaultServer]:
    """One server (per HTTP link) for the tests that do not kill it (each uses its own
    tools)."""
    yield from make_server(tmp_path_factory.mktemp("faults"))


@pytest.fixture
def own(tmp_path: Path) -> Iterator[FaultServer]:
    """A server of the test's own, to kill and restart."""
    yield from make_server(tmp_path)


@asynccontextmanager
async def connect(url: str, **options: Any) -> AsyncIterator[Client]:
    async with Client.over_http(url, **options) as client:
        await client.list_tools()  # the annotations that say which tools are idempotent
        yield client


@pytest.fixture
async def client(shared: FaultServer) -> AsyncIterator[Client]:
    async with connect(shared.url, retry=Retry(attempts=3, base_s=0.01), timeout=30.0) as c:
        yield c


async def test_503_with_retry_after_is_retried_once_after_the_wait(
    shared: FaultServer, client: Client
) -> None:
    result = await client.call_tool("busy_once", {})
    assert not result.is_error
    arrivals = shared.events("busy_once", "arrived")
    assert len(arrivals) == 2  # refused once, then served: exactly one retry
    assert arrivals[1] - arrivals[0] >= 1.0  # Retry-After: 1, measured by the server
    assert client.stats.retries == 1


async def test_killed_mid_call_a_non_idempotent_call_is_never_sent_twice(
    own: FaultServer,
) -> None:
    async with connect(own.url, retry=Retry(attempts=3, base_s=0.05), timeout=10.0) as c:
        call = asyncio.create_task(c.call_tool("write_forever", {"key": "k"}))
        await own.wait_for("write_forever", "started")
        own.kill()
        # Restarted on the same port before the client's loop runs again (start() blocks):
        # a wrong retry would reach the new process and be logged, not die on a refusal.
        own.start()
        with pytest.raises(ConnectionLost):  # it was sent (the server ran it), then lost
            await call
        await asyncio.sleep(0.5)  # room for a wrong retry to arrive
        assert len(own.events("write_forever", "started")) == 1
        assert c.stats.retries == 0


async def test_killed_mid_call_an_idempotent_call_succeeds_after_the_restart(
    own: FaultServer,
) -> None:
    # While the server is down the retries meet refused connects (NotSent, always safe);
    # 40 retries of up to 0.5 s cover a restart of several seconds on a loaded machine.
    retry = Retry(attempts=40, base_s=0.1, cap_s=0.5)
    async with connect(own.url, retry=retry, timeout=30.0) as c:
        call = asyncio.create_task(c.call_tool("put_once_then_ok", {"key": "k"}))
        await own.wait_for("put_once_then_ok", "started")
        first_pid = own.process.pid if own.process else None
        own.kill()
        await asyncio.to_thread(own.start)  # the client retries meanwhile
        result = await call  # within the call's 30 s deadline
        assert not result.is_error
        block = result.content[0]
        assert isinstance(block, TextContent)
        assert block.text == "stored k"
        starts = own.events("put_once_then_ok", "started")
        assert len(starts) == 2
        assert own.process is not None
        assert own.process.pid != first_pid
        assert c.stats.retries >= 1


async def test_a_call_past_its_deadline_is_cancelled_on_the_server(
    shared: FaultServer, client: Client
) -> None:
    with pytest.raises(CallTimeout, match="timed out"):
        await client.call_tool("stuck", {}, timeout=0.5)
    await shared.wait_for("stuck", "cancelled")
    assert len(shared.events("stuck", "finally")) == 1
    assert len(shared.events("stuck", "started")) == 1  # a timeout is not retried
    assert client.stats.timeouts == 1


async def test_the_concurrency_cap_refuses_the_fourth_call_at_once(shared: FaultServer) -> None:
    limits = Limits(max_in_flight=2, max_queue=1)
    async with connect(shared.url, limits=limits, timeout=30.0) as c:
        held = [asyncio.create_task(c.call_tool("hold", {"seconds": 1.0})) for _ in range(3)]
        await shared.wait_for("hold", "started", count=2)
        with pytest.raises(QueueFull, match="max_in_flight=2"):
            await c.call_tool("hold", {"seconds": 0})
        assert not any(task.done() for task in held)  # refused while all three still run
        results = await asyncio.gather(*held)
        assert [r.is_error for r in results] == [False, False, False]
        assert len(shared.events("hold", "started")) == 3  # the refused call never left


async def test_internal_error_is_retried_only_for_an_idempotent_tool(
    shared: FaultServer, client: Client
) -> None:
    with pytest.raises(InternalError):
        await client.call_tool("internal_error_write", {})
    assert len(shared.events("internal_error_write", "arrived")) == 1
    with pytest.raises(InternalError):
        await client.call_tool("internal_error_read", {})
    assert len(shared.events("internal_error_read", "arrived")) == 4  # 1 + Retry.attempts


async def test_invalid_params_is_never_retried(shared: FaultServer, client: Client) -> None:
    with pytest.raises(InvalidParams, match="must be positive"):
        await client.call_tool("invalid_params_read", {})
    assert len(shared.events("invalid_params_read", "arrived")) == 1
