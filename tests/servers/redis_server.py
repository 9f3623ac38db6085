"""A private redis-server for tests: started on a free port, no persistence."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path


def redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found is None and Path("/usr/bin/redis-server").exists():
        found = "/usr/bin/redis-server"
    return found


def start_redis(port: int, binary: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(64).startswith(b"+PONG"):
                    return process
        except OSError:
            pass
        time.sleep(0.05)
    process.kill()
    raise TimeoutError(f"redis-server did not answer on port {port}")


def stop_redis(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)
