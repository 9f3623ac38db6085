"""stdio, server side: newline-delimited JSON-RPC on stdin and stdout.

The transport moves lines. Inbound bytes are split on ``\\n``; a line longer than
``max_line_bytes`` is discarded as it streams in (it is never buffered whole) and the
handler is told, so it can answer with an error. Outbound messages are written whole with
their newline by the event loop's pipe transport, never blocking the loop.

Only protocol messages reach stdout: while the server runs, file descriptor 1 points at
stderr, so a stray ``print`` in a tool or a library cannot corrupt the stream; the real
stdout is kept on a private descriptor. The server stops on EOF (the client closed stdin),
SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import selectors
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["LineHandler", "StdioConfig", "fast_loop_factory", "serve_stdio"]


@dataclass(frozen=True, slots=True)
class StdioConfig:
    max_line_bytes: int = 4 * 1024 * 1024
    """The longest message accepted; a longer line is discarded and answered with an error."""
    protect_stdout: bool = True
    """Point file descriptor 1 at stderr while serving (the protocol keeps its own copy)."""
    eof_grace_s: float = 1.0
    """On EOF or SIGTERM, how long requests already read may run to completion before they
    are cancelled (a client may write its requests and close stdin at once; a supervisor
    stopping the server should not lose the answers in progress). SIGINT cancels at once."""


class LineHandler(Protocol):
    """What the transport calls: one complete line, or the news that one was too long."""

    def handle_line(self, line: bytes) -> None: ...

    def refuse_line(self, limit: int) -> None: ...

    async def aclose(self, grace_s: float = 0.0) -> None: ...


class _LineReader(asyncio.Protocol):
    """Splits a byte stream into lines, discarding any line over the limit as it arrives."""

    def __init__(self, handler: LineHandler, limit: int, done: asyncio.Future[str]) -> None:
        self._handler = handler
        self._limit = limit
        self._done = done
        self._buffer = bytearray()
        self._discarding = False

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            end = data.find(b"\n")
            if end < 0:
                return
            data = data[end + 1 :]
            self._discarding = False
            self._handler.refuse_line(self._limit)
        buffer = self._buffer
        if not buffer and data.endswith(b"\n") and data.count(b"\n") == 1:
            line = data[:-1]
            if len(line) > self._limit:
                self._handler.refuse_line(self._limit)
            elif line.strip():
                self._handler.handle_line(line)
            return
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            if end - start > self._limit:
                self._handler.refuse_line(self._limit)
            else:
                line = bytes(buffer[start:end])
                if line.strip():
                    self._handler.handle_line(line)
            start = end + 1
        del buffer[:start]
        if len(buffer) > self._limit:
            buffer.clear()
            self._discarding = True

    def eof_received(self) -> bool:
        self._finish("eof")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish("eof")

    def _finish(self, reason: str) -> None:
        if not self._done.done():
            self._done.set_result(reason)


async def serve_stdio(
    make_handler: Callable[[Callable[[bytes], None]], LineHandler],
    config: StdioConfig | None = None,
    *,
    stdin: Any = None,
    stdout: Any = None,
) -> str:
    """Serve until EOF or a signal; returns why it stopped ("eof", "SIGTERM", "SIGINT")."""
    config = config or StdioConfig()
    loop = asyncio.get_running_loop()
    stdin = stdin if stdin is not None else sys.stdin.buffer
    out_fd = os.dup((stdout if stdout is not None else sys.stdout.buffer).fileno())
    saved_fd1: int | None = None
    if config.protect_stdout and stdout is None:
        sys.stdout.flush()
        saved_fd1 = os.dup(1)
        os.dup2(2, 1)
    writer = await _connect_writer(loop, out_fd)

    def write(message: bytes) -> None:
        writer.write(message + b"\n")

    handler = make_handler(write)
    done: asyncio.Future[str] = loop.create_future()
    reader = _LineReader(handler, config.max_line_bytes, done)
    stop_reading = await _connect_reader(loop, stdin, reader, done)
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, _stop, done, signum.name)
    reason = "cancelled"
    try:
        reason = await done
        return reason
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signum)
        stop_reading()
        await handler.aclose(config.eof_grace_s if reason in ("eof", "SIGTERM") else 0.0)
        await _drain(writer)
        writer.close()
        if saved_fd1 is not None:
            os.dup2(saved_fd1, 1)
            os.close(saved_fd1)


def fast_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory when it is installed and fds 0 and 1 suit it, else None.

    uvloop cannot watch a regular file or ``/dev/null`` (it aborts where asyncio raises and
    the transport falls back to a thread), so a redirected stdin or stdout keeps the standard
    loop.
    """
    try:
        import uvloop
    except ImportError:
        return None
    if not (_watchable(0, selectors.EVENT_READ) and _watchable(1, selectors.EVENT_WRITE)):
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def _watchable(fd: int, events: int) -> bool:
    """Whether an event loop can watch ``fd``: epoll refuses regular files and some character
    devices (``/dev/null``), which the loop only finds out in a callback, after the
    transport is made (the read would then never start: a hang, not EOF)."""
    try:
        with selectors.DefaultSelector() as probe:
            probe.register(fd, events)
    except (OSError, ValueError):
        return False
    return True


def _stop(done: asyncio.Future[str], reason: str) -> None:
    if not done.done():
        done.set_result(reason)


class _BlockingWriter:
    """Writes straight to a descriptor the event loop cannot watch (a regular file)."""

    def __init__(self, file: io.FileIO) -> None:
        self._file = file

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self._file.write(view) or 0 :]

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self._file.close()


async def _connect_writer(loop: asyncio.AbstractEventLoop, fd: int) -> Any:
    """A pipe transport on ``fd`` (it owns the descriptor), else a blocking writer."""
    pipe = io.FileIO(fd, "wb")
    if not _watchable(fd, selectors.EVENT_WRITE):
        return _BlockingWriter(pipe)
    try:
        writer, _ = await loop.connect_write_pipe(asyncio.Protocol, pipe)
    except ValueError:
        return _BlockingWriter(pipe)
    return writer


async def _connect_reader(
    loop: asyncio.AbstractEventLoop, stdin: Any, reader: _LineReader, done: asyncio.Future[str]
) -> Callable[[], None]:
    """Read stdin through the event loop when it is a pipe or socket, else from a thread."""
    if not _watchable(stdin.fileno(), selectors.EVENT_READ):
        return _read_in_thread(loop, stdin, reader, done)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: reader, stdin)
    except ValueError:  # a regular file: the event loop cannot watch it
        return _read_in_thread(loop, stdin, reader, done)
    return transport.close


def _read_in_thread(
    loop: asyncio.AbstractEventLoop, stdin: Any, reader: _LineReader, done: asyncio.Future[str]
) -> Callable[[], None]:
    stopped = threading.Event()

    def pump() -> None:
        while not stopped.is_set():
            chunk = stdin.read1(65536) if hasattr(stdin, "read1") else stdin.read(65536)
            if not chunk:
                break
            loop.call_soon_threadsafe(reader.data_received, chunk)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(reader.eof_received)

    threading.Thread(target=pump, name="millimcp-stdin", daemon=True).start()
    return stopped.set


async def _drain(writer: Any) -> None:
    """Give buffered output a moment to reach the pipe before closing it."""
    for _ in range(100):
        if writer.is_closing() or writer.get_write_buffer_size() == 0:
            return
        await asyncio.sleep(0.01)
