"""Shared fixtures: real servers in subprocesses on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on port {port} after {timeout} s")


def start_server(args: list[str], port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
    )
    try:
        wait_for_port(port, process)
    except BaseException:
        process.kill()
        raise
    return process


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """The test server of tests/servers/basic_server.py, run by ``python -m millimcp serve``."""
    port = free_port()
    process = start_server(
        ["-m", "millimcp", "serve", "tests.servers.basic_server:server", "--port", str(port)],
        port,
    )
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


@pytest.fixture(scope="session")
def conformance_url() -> Iterator[str]:
    """The conformance fixture server, run as ``python examples/conformance_server.py``."""
    port = free_port()
    process = start_server(["examples/conformance_server.py", "--port", str(port)], port)
    yield f"http://localhost:{port}/mcp"
    stop_server(process)


@pytest.fixture(scope="session")
def tensor_url() -> Iterator[str]:
    """The tensor tools of tests/servers/tensor_server.py, served by uvicorn."""
    port = free_port()
    process = start_server(["tests/servers/tensor_server.py", "--port", str(port)], port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


@pytest.fixture(scope="session")
def missing_tool() -> object:
    """Call with a reason when an external tool is absent: skip, or fail under `make test`.

    ``make test`` installs every tool and sets ``MILLIMCP_REQUIRE_TOOLS=1``, so there a
    missing tool is a failure, never a silent skip.
    """

    def report(reason: str) -> None:
        if os.environ.get("MILLIMCP_REQUIRE_TOOLS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)

    return report


@pytest.fixture(scope="session")
def redis_url(missing_tool: Any) -> Iterator[str]:
    """A Redis for the cache tests: ``MILLIMCP_REDIS_URL`` if given, else a private
    ``redis-server`` on a free port (the machine's own Redis is never touched)."""
    given = os.environ.get("MILLIMCP_REDIS_URL")
    if given:
        yield given
        return
    from tests.servers.redis_server import redis_binary, start_redis, stop_redis

    binary = redis_binary()
    if binary is None:
        missing_tool("redis-server is not installed (.ci/run installs it)")
    assert binary is not None
    port = free_port()
    process = start_redis(port, binary)
    yield f"redis://127.0.0.1:{port}/0"
    stop_redis(process)
