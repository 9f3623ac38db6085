"""A private redis-server for tests: started on a free port, no persistence."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from millimcp.testing.processes import start_subprocess


def redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found is None and Path("/usr/bin/redis-server").exists():
        found = "/usr/bin/redis-server"
    return found


def start_redis(port: int, binary: str) -> subprocess.Popen[bytes]:
    """A redis-server on 127.0.0.1:``port``, returned once it answers PING."""
    command = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    process = start_subprocess(command, port, stderr=subprocess.DEVNULL, timeout=15)
    deadline = time.monotonic() + 15
    while True:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            if sock.recv(64).startswith(b"+PONG"):
                return process
        if time.monotonic() >= deadline:
            process.kill()
            process.wait()
            raise TimeoutError(f"redis-server did not answer PING on port {port}")
        time.sleep(0.05)


def stop_redis(process: subprocess.Popen[bytes]) -> None:
    """Kill it at once (SIGKILL): the tests use this to make Redis die under a client."""
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)
