"""The pieces of a planned shutdown and of the CLI's one-line errors, in-process (the whole
of them runs in subprocesses: tests/integration/hardening, tests/integration/http)."""

from __future__ import annotations

import asyncio
import signal
import socket
from typing import Any

import pytest
import uvicorn

from millimcp import HttpConfig, Server
from millimcp.cli import main
from millimcp.errors import ConfigurationError
from millimcp.server.graceful import GracefulServer, deadline_protocol, drain_target
from millimcp.server.serve import _bind, _limits, _protocol, run_app


def app(**config: Any) -> Any:
    return Server("graceful").asgi(http=HttpConfig(**config))


def test_the_drain_target_is_found_inside_wrappers() -> None:
    inner = app()

    class Wrapper:
        def __init__(self, wrapped: Any) -> None:
            self.app = wrapped

    assert drain_target(Wrapper(Wrapper(inner))) is inner
    assert drain_target(object()) is None
    assert drain_target(None) is None


def test_the_limits_come_from_the_app() -> None:
    assert _limits(app(graceful_timeout_s=3.0)).graceful_timeout_s == 3.0
    assert _limits("module:app") == HttpConfig()


def test_the_first_signal_drains_the_app() -> None:
    served = app()
    config = uvicorn.Config(served, lifespan="off", log_level="critical")
    config.load()
    server = GracefulServer(config)
    server.handle_exit(signal.SIGTERM, None)  # no loop running: drained at once
    assert served.draining
    assert server.should_exit


async def test_the_drain_runs_on_the_loop() -> None:
    served = app()
    config = uvicorn.Config(served, lifespan="off", log_level="critical")
    config.load()
    GracefulServer(config).handle_exit(signal.SIGTERM, None)
    assert not served.draining
    await asyncio.sleep(0)
    assert served.draining


def test_a_port_in_use_is_a_configuration_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigurationError, match=r"cannot listen on 127\.0\.0\.1"):
            _bind("127.0.0.1", port)
        with pytest.raises(ConfigurationError, match="cannot listen"):
            run_app(app(), port=port)
    _bind("127.0.0.1", 0).close()


def test_the_protocol_has_the_header_deadline() -> None:
    # Workers too: each builds its own server (millimcp.server.worker), none is spawned by name.
    protocol = _protocol(2.0)
    assert isinstance(protocol, type)
    assert protocol.__name__ == "DeadlineProtocol"
    assert deadline_protocol(1.0) is not deadline_protocol(1.0)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["serve", "no_such_module_here"], "cannot import 'no_such_module_here'"),
        (["serve", ":server"], "is not module:attribute"),
        (["serve", "millimcp:HttpConfig"], "is not a millimcp Server"),
        (["serve", "millimcp:nothing", "--stdio"], "has no attribute 'nothing'"),
        (["serve", "millimcp:HttpConfig", "--stdio"], "is not a millimcp Server"),
        (["serve", "no_such_module_here", "--workers", "2"], "cannot import"),
        (["serve", "millimcp", "--certfile", "c.pem"], "--certfile and --keyfile go together"),
    ],
)
def test_cli_mistakes_are_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        status = main(argv)
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert says in err


async def test_uvicorn_in_process_times_out_slow_headers_then_drains(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The real uvicorn server in this process: the start line, a 408 for headers that do
    not finish, an idle connection closed, then the first signal drains and stops it."""
    served = app(health_path="/healthz")
    sock = _bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        served,
        http=deadline_protocol(0.3),
        lifespan="on",
        log_level="critical",
        timeout_keep_alive=1,
    )
    server = GracefulServer(config)
    server.banner = "started"
    running = asyncio.create_task(server.serve(sockets=[sock]))
    for _ in range(1000):
        if server.started:
            break
        await asyncio.sleep(0.01)
    assert capsys.readouterr().err == "started\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and nothing more
    assert (await asyncio.wait_for(reader.read(), 10)).startswith(b"HTTP/1.1 408 ")
    writer.close()
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    assert await asyncio.wait_for(idle_reader.read(), 10) == b""  # closed, never spoken to
    idle_writer.close()
    server.handle_exit(signal.SIGTERM, None)
    await asyncio.wait_for(running, 10)
    assert served.draining
    assert server._captured_signals == []  # the process will not die of the signal
