"""What a user sees from ``millimcp serve``: one start line; each mistake one line, status 2."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.conftest import PYTHON_ENV, ROOT, free_port, wait_for_port

SERVE = [sys.executable, "-m", "millimcp", "serve"]


def run_serve(*args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **PYTHON_ENV, **extra_env}
    return subprocess.run(
        [*SERVE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def _end(process: subprocess.Popen[str]) -> None:
    """Kill the server if a failed test left it running; close its stderr."""
    if process.poll() is None:
        process.kill()
        process.wait()
    if process.stderr is not None:
        process.stderr.close()


def test_start_line_then_a_clean_stop() -> None:
    port = free_port()
    env = {**os.environ, **PYTHON_ENV}
    command = [*SERVE, "tests.servers.basic_server:server", "--port", str(port)]
    command += ["--health-path", "/healthz", "--graceful-timeout", "5"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, process, 30)
        assert process.stderr is not None
        line = process.stderr.readline().strip()
        assert line == (
            f"millimcp: serving http://127.0.0.1:{port}/mcp (Ctrl-C or SIGTERM to stop)"
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as ready:
            assert ready.read() == b"ok\n"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert "Traceback" not in process.stderr.read()
    finally:
        _end(process)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["no_such_module_here:server"], "cannot import 'no_such_module_here'"),
        (["tests.servers.basic_server:nothing"], "has no attribute 'nothing'"),
        (["tests.servers.hardening_server:HTTP"], "is not a millimcp Server"),
        (["tests.servers.basic_server:server", "--bogus"], "unrecognized arguments: --bogus"),
        (["no_such_module_here", "--workers", "2"], "cannot import 'no_such_module_here'"),
        (["tests.servers.basic_server:nothing", "--workers", "3"], "has no attribute 'nothing'"),
        (
            ["tests.servers.basic_server:server", *["--certfile", "no.pem", "--keyfile", "no.pem"]],
            "cannot load the TLS certificate 'no.pem' and key 'no.pem': No such file",
        ),
    ],
    ids=["module", "attribute", "not-a-server", "flag", "workers", "workers-attribute", "tls"],
)
def test_a_mistake_is_one_line_and_status_2(args: list[str], says: str) -> None:
    done = run_serve(*args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("millimcp")
    assert says in lines[0]


def test_a_port_in_use_is_one_line_and_status_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_serve("tests.servers.basic_server:server", "--port", str(port))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"millimcp: cannot listen on 127.0.0.1:{port}: Address already in use"
    )


PROTECTED = "tests.servers.task_server:server"
"""A server behind the auth gate with ``MILLIMCP_TEST_TASK_AUTH=1``."""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_without_http_a_protected_server_is_served_natively(workers: str) -> None:
    """The native front serves a protected endpoint too (its auth rules without the ASGI
    gate): it answers 401 to a request without a token, before the endpoint sees it."""
    port = free_port()
    env = {**os.environ, **PYTHON_ENV, "MILLIMCP_TEST_TASK_AUTH": "1"}
    env.pop("MILLIMCP_HTTP_FRONT", None)
    command = [*SERVE, PROTECTED, "--port", str(port), "--workers", workers]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, process, 60)
        assert process.stderr is not None
        assert process.stderr.readline().startswith("millimcp: serving")  # every worker ready
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/mcp", data=b"{}", headers={"content-type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        with refused.value:  # its response, and the socket under it
            assert refused.value.code == 401
            assert "resource_metadata=" in refused.value.headers["www-authenticate"]
            assert refused.value.headers["server"] is None  # uvicorn names itself; native not
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert "Traceback" not in process.stderr.read()
    finally:
        _end(process)
