"""Two workers restarted one after the other under constant load: no call fails, none runs twice.

``millimcp serve --workers 2`` (a supervisor, one listening socket shared by the workers);
8 callers call ``record`` (not idempotent, 20 ms; up to 20 ms between calls, so that some
kept-alive connections are idle when a drain begins) through millimcp's Client
while SIGHUP makes the supervisor replace each worker in turn (start the new one, wait until
it is ready, SIGTERM the old one, which drains). Each call sends a token of its own; the
server appends each token it runs to a file, so the test sees every arrival, from every
worker. It takes both halves: the old worker's drain (503 + ``Retry-After`` and
``Connection: close`` for new requests on its connections, in-flight calls finish, queued
connections left to the other worker) and the client's retry of what never ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from millimcp import Client
from tests.conftest import PYTHON_ENV, ROOT, free_port

CALLERS = 8
FRONTS = ("native", "uvicorn")


class Supervised:
    """``millimcp serve --workers 2`` in a subprocess, its stderr read line by line."""

    def __init__(self, front: str, log: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "millimcp",
                "serve",
                "tests.servers.rolling_server:server",
                "--workers",
                "2",
                "--http",
                front,
                "--port",
                str(self.port),
                "--graceful-timeout",
                "5",
            ],
            cwd=ROOT,
            env={**os.environ, **PYTHON_ENV, "ROLLING_LOG": str(log), **(env or {})},
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        """The first line (from now on) that holds ``text``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} within {timeout} s: {self.seen}") from None
            self.seen.append(line)
            if text in line:
                return line


@pytest.fixture(params=FRONTS)
def supervised(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Supervised]:
    served = Supervised(str(request.param), tmp_path / "arrivals")
    try:
        served.wait_for("millimcp: serving")
        yield served
    finally:
        workers = children(served.process.pid) if served.process.poll() is None else set()
        if served.process.poll() is None:
            served.process.kill()
        served.process.wait()
        for pid in workers:  # a failed test leaves no worker behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        served.reader.join(10)
        assert served.process.stderr is not None
        served.process.stderr.close()


async def test_rolling_restart_under_load_fails_no_call(
    supervised: Supervised, tmp_path: Path
) -> None:
    sent: list[str] = []
    answered: list[str] = []
    failed: list[BaseException] = []
    stop = asyncio.Event()

    async def caller(client: Client, number: int) -> None:
        count = 0
        while not stop.is_set():
            token = f"{number}-{count}"
            count += 1
            sent.append(token)
            try:
                result = await client.call_tool("record", {"token": token})
            except Exception as exc:  # every failure is the test's finding
                failed.append(exc)
            else:
                answered.append(str(result.structured_content or result.content))
            await asyncio.sleep(random.uniform(0, 0.02))

    async with Client.over_http(supervised.url, era="modern") as client:
        callers = [asyncio.create_task(caller(client, n)) for n in range(CALLERS)]
        await asyncio.sleep(0.5)
        supervised.process.send_signal(signal.SIGHUP)
        replaced = [
            await asyncio.to_thread(supervised.wait_for, "replaced by pid") for _ in range(2)
        ]
        await asyncio.to_thread(supervised.wait_for, "restart done")
        await asyncio.sleep(0.5)
        stop.set()
        await asyncio.gather(*callers)
        retries = client.stats.retries
    supervised.process.send_signal(signal.SIGTERM)
    status = await asyncio.to_thread(supervised.process.wait, 30)

    assert failed == [], failed[:3]
    assert retries > 0  # some calls met a draining worker's 503 and went to the other
    assert len(answered) == len(sent)
    arrivals = (tmp_path / "arrivals").read_text().split("\n")[:-1]
    counts = Counter(line.split()[0] for line in arrivals)
    assert sorted(counts) == sorted(sent)  # every call ran...
    assert max(counts.values()) == 1  # ...once
    pids = {line.split()[1] for line in arrivals}
    new_pids = {line.rpartition(" ")[2] for line in replaced}
    # Old workers served calls, and new ones after them (which worker accepts a connection
    # is the kernel's pick: one of each pair may have served none).
    assert pids - new_pids
    assert pids & new_pids
    assert status == 0


def children(pid: int) -> set[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as listing:
        return {int(child) for child in listing.read().split()}


def running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_until(done: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.parametrize("supervised", ["native"], indirect=True)
async def test_a_crashed_worker_is_replaced_and_orphans_exit(supervised: Supervised) -> None:
    supervisor = supervised.process.pid
    workers = children(supervisor)
    assert len(workers) == 2
    crashed = min(workers)
    os.kill(crashed, signal.SIGKILL)
    line = await asyncio.to_thread(supervised.wait_for, "replacing it")
    assert f"worker pid {crashed} exited with status -9" in line
    await asyncio.to_thread(wait_until, lambda: len(children(supervisor) - {crashed}) == 2)
    async with Client.over_http(supervised.url, era="modern") as client:
        for n in range(4):
            await client.call_tool("record", {"token": f"after-{n}"})
    workers = children(supervisor)
    os.kill(supervisor, signal.SIGKILL)  # no SIGTERM to forward: the lifeline ends
    await asyncio.to_thread(wait_until, lambda: not any(map(running, workers)))


def catches_sigterm(pid: int) -> bool:
    """Whether ``pid`` has a handler for SIGTERM (its ``SigCgt`` mask in /proc)."""
    with open(f"/proc/{pid}/status") as status:
        mask = next(line for line in status if line.startswith("SigCgt:")).split()[1]
    return bool(int(mask, 16) >> (signal.SIGTERM - 1) & 1)


def test_sigterm_while_the_workers_start_is_a_clean_stop(tmp_path: Path) -> None:
    """SIGTERM before the first worker is ready (its import takes 5 s): the supervisor says
    so, ends the worker and exits 0; it used to exit 1 without a word (the worker, ended
    before its own handler was set, exits by the signal)."""
    served = Supervised("native", tmp_path / "arrivals", env={"ROLLING_START_DELAY": "5"})
    try:
        supervisor = served.process.pid
        wait_until(lambda: catches_sigterm(supervisor) and bool(children(supervisor)))
        workers = children(supervisor)
        os.kill(supervisor, signal.SIGTERM)
        assert served.process.wait(30) == 0
        served.reader.join(10)
        assert any("stopped while the workers were starting" in line for line in _drain(served))
        assert not any(map(running, workers))
    finally:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait()
        assert served.process.stderr is not None
        served.process.stderr.close()


def _drain(served: Supervised) -> list[str]:
    lines = []
    while not served.lines.empty():
        lines.append(served.lines.get_nowait())
    return lines
