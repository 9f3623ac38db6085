"""Servers in subprocesses for tests and benchmarks: a free port, wait until up, stop.

:func:`serve_subprocess` is the usual entry point::

    with serve_subprocess([sys.executable, "-m", "millimcp", "serve", "app:server",
                           "--port", "{port}"]) as served:
        client.post(served.url("/mcp"), ...)

It picks a free port on 127.0.0.1 (or takes the one given), puts it in place of every
``{port}`` in the command, starts the command, waits until something accepts connections on
that port, and on leaving stops the process: SIGTERM to its pid, then SIGKILL if it has not
exited within ``stop_timeout`` seconds. :func:`start_subprocess` and :func:`stop_process`
are the two halves, for fixtures that hold a server across tests.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, TypeAlias

__all__ = [
    "LOCALHOST",
    "PORT_PLACEHOLDER",
    "ServedProcess",
    "free_port",
    "serve_subprocess",
    "start_subprocess",
    "stop_process",
    "wait_for_port",
]

LOCALHOST: Final = "127.0.0.1"
PORT_PLACEHOLDER: Final = "{port}"
"""Replaced by the port in every argument of a command given to :func:`serve_subprocess`."""

Output: TypeAlias = int | IO[Any] | None
"""Where a child's stdout or stderr goes: ``subprocess.DEVNULL``, ``PIPE``, a file, or None
(inherited)."""


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that nothing listens on now (the kernel's pick for a bind to port 0).

    Another process may take it before the caller's server binds it: that server then fails
    to start, and :func:`wait_for_port` reports its exit.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    port: int,
    process: subprocess.Popen[Any] | None = None,
    timeout: float = 30.0,
    *,
    host: str = LOCALHOST,
) -> None:
    """Return once a TCP connection to ``host:port`` succeeds.

    Raises :class:`RuntimeError` as soon as ``process`` (when given) has exited, and
    :class:`TimeoutError` when nothing accepts within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"the server exited with status {process.returncode} before listening on "
                f"port {port}"
            )
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"nothing listening on {host}:{port} after {timeout} s"
                ) from None
            time.sleep(0.05)


def start_subprocess(
    command: Sequence[str],
    port: int,
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    stdout: Output = subprocess.DEVNULL,
    stderr: Output = None,
    timeout: float = 30.0,
) -> subprocess.Popen[bytes]:
    """Start ``command`` and return once it listens on ``port`` on 127.0.0.1.

    ``env`` is set on top of this process's environment. If the server exits or does not
    listen within ``timeout`` seconds, it is stopped and the error of :func:`wait_for_port`
    propagates.
    """
    environment = {**os.environ, **env} if env is not None else None
    process = subprocess.Popen(
        list(command), cwd=cwd, env=environment, stdout=stdout, stderr=stderr
    )
    try:
        wait_for_port(port, process, timeout)
    except BaseException:
        stop_process(process)
        raise
    return process


def stop_process(process: subprocess.Popen[Any], timeout: float = 10.0) -> int:
    """Stop ``process`` by its pid: SIGTERM, then SIGKILL after ``timeout`` s; its status.

    A process that has already exited is only reaped.
    """
    if process.poll() is None:
        process.terminate()
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


@dataclass(frozen=True, slots=True)
class ServedProcess:
    """A server running in a subprocess, listening on ``host:port``."""

    process: subprocess.Popen[bytes]
    port: int
    host: str = LOCALHOST

    @property
    def pid(self) -> int:
        return self.process.pid

    def url(self, path: str = "/mcp", scheme: str = "http") -> str:
        """``http://127.0.0.1:PORT/mcp`` (or the ``path`` and ``scheme`` given)."""
        return f"{scheme}://{self.host}:{self.port}{path}"


@contextmanager
def serve_subprocess(
    command: Sequence[str],
    *,
    port: int | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    stdout: Output = subprocess.DEVNULL,
    stderr: Output = None,
    timeout: float = 30.0,
    stop_timeout: float = 10.0,
) -> Iterator[ServedProcess]:
    """Run a server for the ``with`` block: started on a free port, stopped on the way out.

    Every ``{port}`` in ``command``'s arguments becomes the port (``port``, or a free one).
    The other arguments are those of :func:`start_subprocess`; ``stop_timeout`` is how long
    SIGTERM has before SIGKILL.
    """
    chosen = free_port() if port is None else port
    argv = [argument.replace(PORT_PLACEHOLDER, str(chosen)) for argument in command]
    process = start_subprocess(
        argv, chosen, cwd=cwd, env=env, stdout=stdout, stderr=stderr, timeout=timeout
    )
    try:
        yield ServedProcess(process, chosen)
    finally:
        stop_process(process, stop_timeout)
