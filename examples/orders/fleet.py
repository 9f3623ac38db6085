"""The demo's processes: the services it starts (``python -m ...`` from ``examples/``), each
on a free port of 127.0.0.1, stopped when the demo ends however it ends; the order service's
command line for a configuration; the link emulator's in front of it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orders.config import CLIENT_FLAGS, FLAGS, OrdersConfig
from orders.tls import Certificates
from orders.wan import Wan

__all__ = [
    "EXAMPLES",
    "Fleet",
    "Process",
    "Service",
    "fleet",
    "free_port",
    "link_args",
    "recommender_requests",
    "server_args",
]

EXAMPLES = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Process:
    """A server process this demo started (``python -m ...`` from ``examples/``)."""

    name: str
    port: int
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode}:\n{tail}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: nothing listening on port {self.port}")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


@dataclass
class Fleet:
    """The processes the demo started; all stopped when it ends, however it ends."""

    logs: Path
    processes: list[Process] = field(default_factory=list)

    def start(
        self,
        name: str,
        args: Sequence[str],
        port_args: Callable[[int], Sequence[str]] = lambda port: ("--port", str(port)),
    ) -> Process:
        port = free_port()
        log = self.logs / f"{name}.out"
        path = [str(EXAMPLES), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "-m", *args, *port_args(port)],
                cwd=EXAMPLES,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        process = Process(name, port, popen, log)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in self.processes:  # all at once, then wait for each
            if process.popen.poll() is None:
                process.popen.terminate()
        for process in self.processes:
            process.stop()


@contextlib.contextmanager
def fleet(logs: Path) -> Iterator[Fleet]:
    started = Fleet(logs)
    try:
        yield started
    finally:
        started.stop()


@dataclass
class Service:
    """One configuration of the order service, running."""

    label: str
    config: OrdersConfig
    process: Process
    front: Process | None = None
    """The link emulator in front of it (the WAN), if any: the agents call through it."""
    ssl: ssl.SSLContext | None = None
    """The agents' TLS context (trusting the demo's CA); None: plain HTTP."""

    @property
    def url(self) -> str:
        port = (self.front or self.process).port
        return f"http{'s' if self.ssl else ''}://127.0.0.1:{port}/mcp"

    @property
    def direct_url(self) -> str:
        """The service itself, not through the link (for the setup: priming its cache)."""
        return f"http{'s' if self.ssl else ''}://127.0.0.1:{self.process.port}/mcp"


def server_args(
    config: OrdersConfig,
    db_url: str,
    recommender: str,
    orders: int,
    log: Path,
    tls: Certificates | None = None,
) -> list[str]:
    args = ["orders.server", "--preset", "naive", "--db", db_url, "--recommender", recommender]
    args += ["--orders", str(orders), "--log-file", str(log)]
    if tls is not None:
        args += ["--certfile", str(tls.certfile), "--keyfile", str(tls.keyfile)]
    for flag in FLAGS:
        if flag not in CLIENT_FLAGS and getattr(config, flag):
            args += ["--set", f"{flag}=true"]
    return args


def link_args(wan: Wan, target: int, port: int) -> list[str]:
    """The link emulator's arguments: listening on ``port``, in front of ``target``."""
    return wan.link_args(port, target)


def recommender_requests(base: str) -> int | None:
    """How often the recommendation service has been asked so far."""
    try:
        with urllib.request.urlopen(f"{base}/stats", timeout=10) as response:
            return int(json.loads(response.read())["requests"])
    except (OSError, ValueError, KeyError):
        return None
