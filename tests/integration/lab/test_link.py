"""The link emulator over real sockets on 127.0.0.1: the delay, the bandwidth, the order of
the stream, a half-close and a reset passed on, and ``millimcp link`` as a user runs it.

Only lower bounds are asserted on time (an emulated delay cannot be shorter than asked;
longer is the machine being busy)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from millimcp.lab import cli
from millimcp.lab.link import LinkConfig, command, open_link
from millimcp.lab.link.pipe import reset
from tests.conftest import free_port

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def server(handler: Handler) -> AsyncIterator[int]:
    listening = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield int(listening.sockets[0].getsockname()[1])
    finally:
        listening.close()
        await listening.wait_closed()


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


async def test_a_round_trip_takes_at_least_the_rtt_and_connecting_one_more() -> None:
    async with server(echo) as port, open_link(LinkConfig(rtt_s=0.12), ("127.0.0.1", port)) as link:
        began = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", link.port)
        writer.write(b"ping")
        assert await reader.readexactly(4) == b"ping"
        first = time.perf_counter() - began
        began = time.perf_counter()
        writer.write(b"pong")
        assert await reader.readexactly(4) == b"pong"
        second = time.perf_counter() - began
        writer.close()
        await writer.wait_closed()
    assert first >= 0.24 * 0.98  # the handshake's RTT, then the data's
    assert second >= 0.12 * 0.98
    stats = link.stats()
    assert stats.connections == 1
    assert stats.bytes_up == stats.bytes_down == 8


async def test_bandwidth_paces_a_transfer_and_the_stream_arrives_whole() -> None:
    size = 300_000
    payload = os.urandom(size)

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(1)
        writer.write(payload)
        await writer.drain()
        writer.close()

    config = LinkConfig(rtt_s=0.01, bandwidth_bps=8e6, jitter_s=0.004, seed=5)  # 1 MB/s
    async with server(send) as port, open_link(config, ("127.0.0.1", port)) as link:
        reader, writer = await asyncio.open_connection("127.0.0.1", link.port)
        writer.write(b"go")
        began = time.perf_counter()
        got = await reader.read()  # to the end: the server's FIN came through
        took = time.perf_counter() - began
        writer.close()
        await writer.wait_closed()
    assert hashlib.sha256(got).digest() == hashlib.sha256(payload).digest()  # in order, whole
    assert took >= (size - config.burst) / 1e6 * 0.95


async def test_many_connections_keep_their_own_order() -> None:
    config = LinkConfig(rtt_s=0.02, jitter_s=0.01, seed=2, chunk=512)
    async with server(echo) as port, open_link(config, ("127.0.0.1", port)) as link:

        async def one(number: int) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", link.port)
            sent = b"".join(f"{number}:{i};".encode() for i in range(2000))
            writer.write(sent)
            writer.write_eof()
            got = await reader.read()
            writer.close()
            await writer.wait_closed()
            assert got == sent
            return got

        results = await asyncio.gather(*(one(n) for n in range(10)))
    assert len(set(results)) == 10
    assert link.stats().connections == 10


async def test_a_half_close_reaches_the_server_and_its_answer_still_comes_back() -> None:
    async def count(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received = await reader.read()  # until the client's half-close
        writer.write(f"got {len(received)}".encode())
        await writer.drain()
        writer.close()

    async with server(count) as port, open_link(LinkConfig(0.02), ("127.0.0.1", port)) as link:
        reader, writer = await asyncio.open_connection("127.0.0.1", link.port)
        writer.write(b"x" * 100_000)
        writer.write_eof()
        assert await asyncio.wait_for(reader.read(), 10) == b"got 100000"
        writer.close()
        await writer.wait_closed()


async def test_a_peer_that_resets_is_seen_as_a_reset_on_the_other_side() -> None:
    async def rude(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(5)
        reset(writer)

    async with server(rude) as port, open_link(LinkConfig(0.02), ("127.0.0.1", port)) as link:
        reader, writer = await asyncio.open_connection("127.0.0.1", link.port)
        writer.write(b"hello")
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.read(100), 10)
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
        for _ in range(100):
            if link.stats().open == 0:
                break
            await asyncio.sleep(0.01)
    assert link.stats().resets == 1
    assert link.stats().open == 0


async def test_a_client_that_resets_resets_the_server_side() -> None:
    seen: list[str] = []

    async def patient(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            data = await reader.read(100)
            seen.append("eof" if not data else "data")
            data = await reader.read(100)
            seen.append("eof" if not data else "data")
        except ConnectionResetError:
            seen.append("reset")
        writer.close()

    async with server(patient) as port, open_link(LinkConfig(0.02), ("127.0.0.1", port)) as link:
        _, writer = await asyncio.open_connection("127.0.0.1", link.port)
        writer.write(b"hello")
        await asyncio.sleep(0.1)
        reset(writer)
        for _ in range(200):
            if len(seen) == 2:
                break
            await asyncio.sleep(0.01)
    assert seen == ["data", "reset"]


async def test_a_target_that_is_not_listening_resets_the_client() -> None:
    async with open_link(LinkConfig(0.01), ("127.0.0.1", free_port())) as link:
        reader, writer = await asyncio.open_connection("127.0.0.1", link.port)
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.read(10), 10)
        writer.close()


def test_the_command_carries_a_connection_and_reports_its_cpu() -> None:
    async def scenario() -> bytes:
        async with server(echo) as port:
            listen = free_port()
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "millimcp",
                "link",
                "--listen",
                f"127.0.0.1:{listen}",
                "--to",
                f"127.0.0.1:{port}",
                "--rtt",
                "20ms",
                "--bandwidth",
                "50mbit",
                "--loss",
                "0.1%",
                "--jitter",
                "1ms",
                stdout=asyncio.subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            assert proc.stdout is not None
            banner = await asyncio.wait_for(proc.stdout.readline(), 30)
            reader, writer = await asyncio.open_connection("127.0.0.1", listen)
            writer.write(b"through the link")
            writer.write_eof()
            assert await asyncio.wait_for(reader.read(), 10) == b"through the link"
            writer.close()
            await writer.wait_closed()
            proc.send_signal(signal.SIGTERM)
            rest = await asyncio.wait_for(proc.stdout.read(), 30)
            assert await proc.wait() == 0
            return banner + rest

    output = asyncio.run(scenario()).decode()
    assert "link: userspace path (kernel path not used: " in output
    assert "RTT 20 ms, 50 Mbit/s each way, 0.1% loss, jitter 1 ms" in output
    # the connection may still be closing when the signal comes
    assert re.search(r"link: stopped: 1 connections \([01] open\)", output), output
    assert "emulator CPU" in output


async def test_the_command_loop_reports_as_it_goes_and_when_stopped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with server(echo) as port:
        stop = asyncio.Event()
        listen = free_port()
        config = LinkConfig(rtt_s=0.01)
        serving = asyncio.create_task(
            command._serve(config, ("127.0.0.1", listen), ("127.0.0.1", port), 0.05, "", stop)
        )
        for _ in range(200):
            if "link: userspace path" in capsys.readouterr().out:
                break
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", listen)
        writer.write(b"abc")
        writer.write_eof()
        assert await reader.read() == b"abc"
        writer.close()
        await writer.wait_closed()
        await asyncio.sleep(0.12)  # at least one periodic report
        stop.set()
        assert await asyncio.wait_for(serving, 10) == 0
    out = capsys.readouterr().out
    assert "link: 1 connections" in out  # a periodic line
    assert re.search(r"link: stopped: 1 connections \([01] open\), 0\.00 MB up", out), out


def test_the_command_refuses_bad_units_and_a_missing_kernel_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    route = ["link", "--listen", "127.0.0.1:1", "--to", "127.0.0.1:2"]
    assert cli.main([*route, "--rtt", "soon"]) == 2
    assert "not a duration" in capsys.readouterr().err
    assert cli.main([*route, "--to", "nowhere"]) == 2
    assert "not HOST:PORT" in capsys.readouterr().err
    status = cli.main([*route, "--path", "kernel"])
    out = capsys.readouterr()
    if status == 0:  # root with netem: the commands are printed
        assert "netem delay 20ms" in out.out
    else:
        assert status == 2
        assert "no kernel path here" in out.err
