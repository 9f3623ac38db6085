"""Fixtures of the case study's tests: a small seeded database, the recommendation service
and the order service, each a real process on 127.0.0.1.

``examples/`` goes on ``sys.path`` so that the tests import ``orders`` as the demo does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millimcp.testing.processes import free_port, start_subprocess, stop_process

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

from orders.auth import mint  # noqa: E402
from orders.config import NAIVE  # noqa: E402
from orders.db import ensure_database  # noqa: E402

SMALL = 20_000
"""Orders seeded for the tests (the demo seeds 1,000,000)."""
LATENCY_MS = 250.0
"""The recommendation service's latency in the tests (the demo's is 400 ms)."""


def start(args: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """``python -m <args>`` from ``examples/``, its output in ``log``; waits for ``port``."""
    env = {"PYTHONPATH": f"{EXAMPLES}{os.pathsep}{ROOT}"}
    with open(log, "ab") as out:
        return start_subprocess(
            [sys.executable, "-m", *args],
            port,
            cwd=EXAMPLES,
            env=env,
            stdout=out,
            stderr=out,
            timeout=60,
        )


@pytest.fixture(scope="session")
def orders_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("orders")


@pytest.fixture(scope="session")
def orders_db(orders_dir: Path) -> str:
    """A SQLite database of 20,000 orders, and its copy with the covering index."""
    url = f"sqlite:///{orders_dir / 'orders.db'}"
    ensure_database(url, orders=SMALL, covering=False)
    ensure_database(url, orders=SMALL, covering=True)
    return url


@pytest.fixture(scope="session")
def recommender(orders_dir: Path) -> Iterator[str]:
    """``python -m orders.recommender`` with a 250 ms latency; its base URL."""
    port = free_port()
    process = start(
        ["orders.recommender", "--port", str(port), "--latency-ms", str(LATENCY_MS)],
        port,
        orders_dir / "recommender.log",
    )
    yield f"http://127.0.0.1:{port}"
    stop_process(process)


def recommender_stats(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/stats", timeout=10) as response:
        stats: dict[str, Any] = json.loads(response.read())
    return stats


class Launcher:
    """``launch("tuned", "trimmed=false", db=...)``: an order service process; its MCP URL.

    A configuration is started once and lives until the end of the session."""

    def __init__(self, db: str, recommender: str, folder: Path) -> None:
        self.db = db
        self.recommender = recommender
        self.folder = folder
        self.processes: list[subprocess.Popen[bytes]] = []
        self.started: dict[tuple[Any, ...], str] = {}
        self.logs: dict[str, Path] = {}
        """The service's log file by MCP URL."""
        self.by_url: dict[str, tuple[tuple[Any, ...], subprocess.Popen[bytes]]] = {}

    def __call__(self, preset: str, *settings: str, db: str | None = None) -> str:
        key = (preset, settings, db)
        if key in self.started:
            return self.started[key]
        port = free_port()
        name = f"{preset}-{len(self.processes)}"
        log = self.folder / f"{name}.log"
        args = ["orders.server", "--preset", preset, "--port", str(port)]
        args += ["--db", db or self.db, "--orders", str(SMALL)]
        args += ["--recommender", self.recommender, "--log-file", str(log)]
        for setting in settings:
            args += ["--set", setting]
        process = start(args, port, self.folder / f"{name}.out")
        self.processes.append(process)
        url = self.started[key] = f"http://127.0.0.1:{port}/mcp"
        self.logs[url] = log
        self.by_url[url] = (key, process)
        return url

    def stop(self, url: str) -> None:
        """Stop the service at ``url`` now (a later call with its settings starts anew)."""
        key, process = self.by_url.pop(url)
        del self.started[key]
        stop_process(process)

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                stop_process(process)


@pytest.fixture(scope="session")
def launch(orders_db: str, recommender: str, orders_dir: Path) -> Iterator[Launcher]:
    launcher = Launcher(orders_db, recommender, orders_dir)
    yield launcher
    launcher.close()


@pytest.fixture(scope="session")
def token() -> str:
    """A token that may read and write every customer."""
    return mint(NAIVE.auth_secret, "test-agent")
