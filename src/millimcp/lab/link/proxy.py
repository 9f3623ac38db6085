"""The userspace link: a TCP proxy on 127.0.0.1 whose every connection crosses an emulated
path (:class:`~millimcp.lab.link.spec.LinkConfig`) to the target, each direction on its own
:class:`~millimcp.lab.link.pipe.Pipe`. It counts what it carried and the CPU it spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from millimcp.lab.link.pipe import Counters, Pipe, reset
from millimcp.lab.link.schedule import Schedule
from millimcp.lab.link.spec import LinkConfig

__all__ = ["Link", "LinkStats", "open_link"]


@dataclass(frozen=True, slots=True)
class LinkStats:
    """A snapshot of what the link did since it started."""

    connections: int
    open: int
    bytes_up: int
    bytes_down: int
    chunks: int
    losses: int
    resets: int
    cpu_s: float
    wall_s: float

    @property
    def cpu_pct(self) -> float:
        """The emulator's CPU, as a percentage of one core over its lifetime."""
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def cpu_us_per_kb(self) -> float:
        moved = (self.bytes_up + self.bytes_down) / 1000.0
        return self.cpu_s * 1e6 / moved if moved else 0.0

    def describe(self) -> str:
        return (
            f"{self.connections:,} connections ({self.open} open), "
            f"{self.bytes_up / 1e6:.2f} MB up / {self.bytes_down / 1e6:.2f} MB down in "
            f"{self.chunks:,} chunks, {self.losses} retransmissions emulated, "
            f"{self.resets} resets; emulator CPU {self.cpu_s:.2f} s "
            f"({self.cpu_pct:.1f}% of a core, {self.cpu_us_per_kb:.1f} µs/KB)"
        )


class Link:
    """A running link: listening on ``port`` (127.0.0.1 by default), forwarding to
    ``target``. Use :func:`open_link`, or :meth:`start` and :meth:`close`."""

    def __init__(
        self,
        config: LinkConfig,
        target: tuple[str, int],
        listen: tuple[str, int] = ("127.0.0.1", 0),
    ) -> None:
        self.config = config
        self.target = target
        self.listen = listen
        self.counters = Counters()
        self._random = random.Random(config.seed)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the link is not started")
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        host, port = self.listen
        self._server = await asyncio.start_server(
            self._connection, host, port, limit=self.config.chunk * 4, backlog=1024
        )
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def stats(self) -> LinkStats:
        c = self.counters
        return LinkStats(
            c.connections,
            c.open,
            c.bytes_up,
            c.bytes_down,
            c.chunks,
            c.losses,
            c.resets,
            time.process_time() - self._cpu0,
            time.monotonic() - self._wall0,
        )

    async def _connection(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self.counters.connections += 1
        self.counters.open += 1
        try:
            await self._carry(client_reader, client_writer)
        finally:
            self.counters.open -= 1
            if task is not None:
                self._tasks.discard(task)

    async def _carry(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        opened_at = loop.time()
        try:
            server_reader, server_writer = await asyncio.open_connection(
                *self.target, limit=self.config.chunk * 4
            )
        except OSError:
            reset(client_writer)
            return
        for writer in (client_writer, server_writer):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # the handshake crosses the path: the client's data starts one RTT after its connect
        # (SYN, SYN-ACK), as when connect() itself takes that long
        wait = opened_at + self.config.rtt_s - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        up = Schedule(self.config, random.Random(self._random.random()))
        down = Schedule(self.config, random.Random(self._random.random()))
        pipes = [
            Pipe(client_reader, server_writer, up, self.counters, up=True),
            Pipe(server_reader, client_writer, down, self.counters, up=False),
        ]
        tasks = [asyncio.create_task(pipe.run()) for pipe in pipes]
        try:
            pending: set[asyncio.Task[str]] = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if any(task.result() == "reset" for task in done):
                    # a reset (passed on, or met writing): nothing more crosses either way
                    reset(client_writer)
                    reset(server_writer)
                    break
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for writer in (client_writer, server_writer):
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()


@contextlib.asynccontextmanager
async def open_link(
    config: LinkConfig, target: tuple[str, int], listen: tuple[str, int] = ("127.0.0.1", 0)
) -> AsyncIterator[Link]:
    """Start a :class:`Link` for the duration of the ``async with``."""
    link = Link(config, target, listen)
    await link.start()
    try:
        yield link
    finally:
        await link.close()
