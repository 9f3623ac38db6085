"""Shared fixtures: real servers in subprocesses on 127.0.0.1.

The process plumbing is :mod:`millimcp.testing.processes`; :func:`serve_python` runs a
Python command from the repository root with it, and ``start_server``/``stop_server`` are
its two halves for tests that hold a server themselves.

Every millimcp HTTP server the tests start runs on one front, :data:`FRONT`: the default
(native) unless ``MILLIMCP_HTTP_FRONT`` names another. The servers inherit the variable, so
``millimcp serve`` without ``--http``, ``run_http()``, ``run_app()``, a compat server's
``run()`` and the supervisor's workers all follow it; ``make test-fronts`` sets it to uvicorn.
The hostile-input suite (tests/integration/hardening) runs on both fronts regardless.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from millimcp.server.serve import default_front
from millimcp.testing.processes import (
    ServedProcess,
    free_port,
    serve_subprocess,
    start_subprocess,
    stop_process,
    wait_for_port,
)

__all__ = [
    "FRONT",
    "ROOT",
    "free_port",
    "serve_python",
    "start_server",
    "stop_server",
    "wait_for_port",
]

ROOT = Path(__file__).resolve().parent.parent
PYTHON_ENV = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
"""Set for every Python server the tests start, so that ``tests.servers...`` imports and the
servers run this checkout's ``src`` (not wherever an editable install points)."""


FRONT = default_front()
"""The HTTP front of the tests' millimcp servers: ``$MILLIMCP_HTTP_FRONT``, else native."""


def serve_python(args: Sequence[str], **options: Any) -> AbstractContextManager[ServedProcess]:
    """``python ARGS`` from the repository root for a ``with`` block (``{port}``: a free port).

    ``options`` are those of :func:`millimcp.testing.processes.serve_subprocess`; ``env``
    is added to :data:`PYTHON_ENV`.
    """
    env = {**PYTHON_ENV, **options.pop("env", {})}
    return serve_subprocess([sys.executable, *args], cwd=ROOT, env=env, **options)


def start_server(args: Sequence[str], port: int) -> subprocess.Popen[bytes]:
    """``python ARGS`` from the repository root, returned once it listens on ``port``."""
    return start_subprocess([sys.executable, *args], port, cwd=ROOT, env=PYTHON_ENV)


def stop_server(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s (:func:`millimcp.testing.processes.stop_process`)."""
    stop_process(process)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """The test server of tests/servers/basic_server.py, run by ``python -m millimcp serve``
    on :data:`FRONT` (the Inspector and official-SDK interop tests use it)."""
    command = ["-m", "millimcp", "serve", "tests.servers.basic_server:server", "--port", "{port}"]
    with serve_python([*command, "--http", FRONT]) as served:
        yield served.url()


@pytest.fixture(scope="session")
def conformance_url() -> Iterator[str]:
    """The conformance fixture server, run as ``python examples/conformance_server.py``
    on :data:`FRONT`."""
    command = ["examples/conformance_server.py", "--port", "{port}", "--http", FRONT]
    with serve_python(command) as served:
        yield f"http://localhost:{served.port}/mcp"


@pytest.fixture(scope="session")
def tensor_url() -> Iterator[str]:
    """The tensor tools of tests/servers/tensor_server.py (``run_app``: on :data:`FRONT`)."""
    with serve_python(["tests/servers/tensor_server.py", "--port", "{port}"]) as served:
        yield served.url()


MissingTool = Callable[[str], None]
"""The type of the ``missing_tool`` fixture."""


@pytest.fixture(scope="session")
def missing_tool() -> MissingTool:
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
def redis_url(missing_tool: MissingTool) -> Iterator[str]:
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


@pytest.fixture(params=["native", "aiohttp"])
def http_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once per HTTP link of ``Client.over_http`` (``http=None`` picks it):
    modules that test the client over HTTP use it with
    ``pytestmark = pytest.mark.usefixtures("http_kind")``."""
    from millimcp.client import http_choice

    kind: str = request.param
    monkeypatch.setattr(http_choice, "DEFAULT", kind)
    return kind


def shm_segments() -> set[str]:
    """The names of millimcp's shared-memory segments in /dev/shm now."""
    from millimcp.tensor.shm import DIRECTORY, PREFIX

    return {name for name in os.listdir(DIRECTORY) if name.startswith(PREFIX)}


@pytest.fixture
def clean_dev_shm() -> Iterator[None]:
    """Fails the test that leaves one of millimcp's segments in /dev/shm."""
    before = shm_segments()
    yield
    assert shm_segments() - before == set(), "a test left a segment in /dev/shm"
