"""``millimcp.testing.processes``: free ports, waiting for a listener, starting and stopping
real subprocesses."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from millimcp.testing import (
    ServedProcess,
    free_port,
    serve_subprocess,
    start_subprocess,
    stop_process,
    wait_for_port,
)

LISTENER = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', int(sys.argv[-1])))\n"
    "s.listen()\n"
    "while True:\n"
    "    s.accept()[0].close()\n"
)
"""A server that listens on the port of its last argument and takes every connection."""

STUBBORN = (
    "import signal, socket, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', int(sys.argv[-1])))\n"
    "s.listen()\n"
    "time.sleep(120)\n"
)
"""A server that ignores SIGTERM."""


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_free_port_can_be_bound() -> None:
    port = free_port()
    assert 1024 <= port <= 65535
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        wait_for_port(port, timeout=5)


def test_waiting_for_nothing_times_out() -> None:
    port = free_port()
    with pytest.raises(TimeoutError, match=f"127.0.0.1:{port}"):
        wait_for_port(port, timeout=0.2)


def test_waiting_stops_when_the_process_exits() -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    try:
        with pytest.raises(RuntimeError, match="status 3"):
            wait_for_port(free_port(), process, timeout=60)
    finally:
        process.wait()


def test_serve_subprocess_starts_on_a_free_port_and_stops() -> None:
    with serve_subprocess([sys.executable, "-c", LISTENER, "{port}"]) as served:
        assert isinstance(served, ServedProcess)
        assert served.process.poll() is None
        assert served.pid == served.process.pid
        assert served.url() == f"http://127.0.0.1:{served.port}/mcp"
        assert served.url("/metrics", "https") == f"https://127.0.0.1:{served.port}/metrics"
        socket.create_connection(("127.0.0.1", served.port), timeout=5).close()
    assert served.process.returncode == -signal.SIGTERM
    assert refuses(served.port)


def test_serve_subprocess_takes_a_given_port_and_an_environment() -> None:
    port = free_port()
    code = "import os, sys; assert os.environ['MARK'] == 'x'; exec(sys.argv[1])"
    command = [sys.executable, "-c", code, LISTENER, "{port}"]
    with serve_subprocess(command, port=port, env={"MARK": "x"}) as served:
        assert served.port == port
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_server_that_does_not_start_is_reported_and_reaped() -> None:
    with (
        pytest.raises(RuntimeError, match="status 2"),
        serve_subprocess([sys.executable, "-c", "raise SystemExit(2)", "{port}"]),
    ):
        raise AssertionError("the block must not run")


def test_a_server_that_never_listens_is_stopped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"
    command = [sys.executable, "-c", code, str(pid_file)]
    with pytest.raises(TimeoutError):
        start_subprocess(command, free_port(), timeout=3)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # stopped and reaped
        os.kill(pid, 0)


def test_sigterm_ignored_means_sigkill() -> None:
    port = free_port()
    process = start_subprocess([sys.executable, "-c", STUBBORN, str(port)], port)
    assert stop_process(process, timeout=0.5) == -signal.SIGKILL
    assert process.returncode == -signal.SIGKILL


def test_stopping_an_exited_process_only_reaps_it() -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(5)"])
    process.wait()
    assert stop_process(process) == 5
