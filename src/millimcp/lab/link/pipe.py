"""One direction of one connection: read chunks from one socket, hold each until its
arrival time (:class:`~millimcp.lab.link.schedule.Schedule`), write it to the other.

What ends a direction travels like data, after the same delay and behind what was sent
before it: an end of stream is passed on as a half-close (``write_eof``), a reset as a reset
(the other socket is closed with ``SO_LINGER`` 0, which makes the kernel send RST).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections import deque
from dataclasses import dataclass
from typing import Final, Literal

from millimcp.lab.link.schedule import Schedule

__all__ = ["Counters", "Pipe", "reset"]

End = Literal["eof", "reset"]
_LINGER_ZERO: Final = struct.pack("ii", 1, 0)


@dataclass(slots=True)
class Counters:
    """What crossed the link (all connections, both directions)."""

    connections: int = 0
    open: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    chunks: int = 0
    losses: int = 0
    resets: int = 0


def reset(writer: asyncio.StreamWriter) -> None:
    """Close ``writer``'s socket with a reset (RST) rather than a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
    writer.transport.abort()


class Pipe:
    """Carry ``source`` to ``target`` on ``schedule``; :meth:`run` returns how it ended."""

    def __init__(
        self,
        source: asyncio.StreamReader,
        target: asyncio.StreamWriter,
        schedule: Schedule,
        counters: Counters,
        *,
        up: bool,
    ) -> None:
        self.source = source
        self.target = target
        self.schedule = schedule
        self.counters = counters
        self.up = up
        self._queue: deque[tuple[float, bytes | End]] = deque()
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._held = 0
        self.ended: End | None = None
        self.target_failed = False

    async def run(self) -> End:
        """Both halves: the reader and the delayed writer. Ends when the end has been passed
        on (or the target failed: then the source is reset too)."""
        reader = asyncio.create_task(self._read())
        try:
            return await self._write()
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    def _put(self, item: bytes | End, now: float) -> None:
        size = len(item) if isinstance(item, bytes) else 0
        self._queue.append((self.schedule.arrival(size, now), item))
        self._held += size
        if self._held >= self.schedule.config.buffer:
            self._room.clear()
        self._ready.set()

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        size = self.schedule.config.chunk
        while True:
            await self._room.wait()
            try:
                data = await self.source.read(size)
            except (ConnectionError, OSError):
                self._put("reset", loop.time())
                return
            if not data:
                self._put("eof", loop.time())
                return
            if self.up:
                self.counters.bytes_up += len(data)
            else:
                self.counters.bytes_down += len(data)
            self.counters.chunks += 1
            self._put(data, loop.time())

    async def _write(self) -> End:
        loop = asyncio.get_running_loop()
        losses = self.schedule.losses
        while True:
            while not self._queue:
                self._ready.clear()
                await self._ready.wait()
            at, item = self._queue.popleft()
            wait = at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self.counters.losses += self.schedule.losses - losses
            losses = self.schedule.losses
            if isinstance(item, str):
                self.ended = item
                self._pass_on(item)
                return item
            self._held -= len(item)
            if self._held < self.schedule.config.buffer:
                self._room.set()
            try:
                self.target.write(item)
                await self.target.drain()
            except (ConnectionError, OSError):
                self.target_failed = True
                self.ended = "reset"
                return "reset"

    def _pass_on(self, end: End) -> None:
        if end == "reset":
            self.counters.resets += 1
            reset(self.target)
            return
        try:
            if self.target.can_write_eof():
                self.target.write_eof()
        except (ConnectionError, OSError):
            self.target_failed = True
