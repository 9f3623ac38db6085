"""An instrumented stdio server process for ``millimcp profile``: every step timed.

:class:`TimedProcess` runs the server with pipes for stdin and stdout and moves one
newline-delimited JSON-RPC message per line. It is the process's
:class:`asyncio.SubprocessProtocol`: the arrival time of each stdout chunk is taken in
``pipe_data_received``, before parsing, so the first and last byte of a response line are
when the event loop saw them. Lines that are not the awaited response (notifications,
requests from the server, log lines) are skipped. stderr is kept as a short tail for error
messages. Closing: stdin EOF, a grace period, then SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

import msgspec

from millimcp.errors import ConnectionLost, FrameTooLarge, NotSent, ProtocolError
from millimcp.protocol import decode_message

__all__ = ["Line", "TimedProcess", "spawn_timed"]

clock: Final = time.perf_counter_ns
DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
_STDERR_TAIL: Final = 4096
_CLOSE_GRACE_S: Final = 2.0


@dataclass(slots=True)
class Line:
    """The response line and when its first and last bytes arrived."""

    body: bytes
    first_byte_ns: int
    last_byte_ns: int
    skipped: int
    """Lines before it that were not the response."""


class TimedProcess(asyncio.SubprocessProtocol):
    """A server process; one request at a time."""

    def __init__(self, max_line_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes
        self.transport: asyncio.SubprocessTransport | None = None
        self.stderr_tail = b""
        self._buffer = b""
        self._line_since = 0
        self._skipped = 0
        self._request_id: int | str | None = None
        self._waiter: asyncio.Future[Line] | None = None
        self._exited: asyncio.Future[None] | None = None
        self._write_paused = False
        self._resume: asyncio.Future[None] | None = None
        self._stdout_closed = False

    # -- asyncio.SubprocessProtocol -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.SubprocessTransport", transport)  # uvloop: no subclass
        self._exited = asyncio.get_running_loop().create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        now = clock()
        if fd == 2:
            self.stderr_tail = (self.stderr_tail + data)[-_STDERR_TAIL:]
            return
        if not self._line_since:
            self._line_since = now
        buffer = self._buffer + data if self._buffer else data
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            line = buffer[start:end]
            since = self._line_since
            start = end + 1
            self._line_since = now if start < len(buffer) else 0
            if line.strip():
                self._on_line(line, since, now)
        self._buffer = buffer[start:]
        if len(self._buffer) > self.max_line_bytes:
            self._buffer = b""
            self._fail(FrameTooLarge(self.max_line_bytes))
        if not self._buffer:
            self._line_since = 0

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._stdout_closed = True
            self._fail(ConnectionLost(f"the server's stdout closed{self._why()}"))
        elif fd == 0 and self._resume is not None and not self._resume.done():
            self._resume.set_result(None)

    def process_exited(self) -> None:
        if self._exited is not None and not self._exited.done():
            self._exited.set_result(None)
        self._fail(ConnectionLost(f"the server exited{self._why()}"))

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._resume is not None and not self._resume.done():
            self._resume.set_result(None)

    # -- requests -------------------------------------------------------------------------

    def write(self, data: bytes, request_id: int | str) -> asyncio.Future[Line]:
        """Write one line (``data`` ends with a newline) and expect the response with
        ``request_id``."""
        transport = self.transport
        if transport is None or self._stdout_closed or transport.get_returncode() is not None:
            raise NotSent(f"the server process is not running{self._why()}")
        stdin = cast("asyncio.WriteTransport", transport.get_pipe_transport(0))
        self._request_id = request_id
        self._skipped = 0
        self._waiter = asyncio.get_running_loop().create_future()
        stdin.write(data)
        return self._waiter

    def notify(self, data: bytes) -> None:
        """Write a line that expects no answer (a notification)."""
        transport = self.transport
        if transport is None or transport.get_returncode() is not None:
            raise NotSent(f"the server process is not running{self._why()}")
        stdin = cast("asyncio.WriteTransport", transport.get_pipe_transport(0))
        stdin.write(data)

    async def drain(self) -> bool:
        """Wait until the pipe's write buffer is below its high-water mark; whether that
        took a wait."""
        waited = self._write_paused
        if waited:
            self._resume = asyncio.get_running_loop().create_future()
            await self._resume
        return waited

    async def close(self) -> None:
        """End the process: stdin EOF, then SIGTERM, then SIGKILL (its process group)."""
        transport = self.transport
        if transport is None:
            return
        exited = self._exited
        assert exited is not None
        stdin = transport.get_pipe_transport(0)
        if stdin is not None:
            stdin.close()
        for signum in (None, signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
            if signum is not None:
                self._signal(transport, signum)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(exited), _CLOSE_GRACE_S)
                break
        transport.close()

    @staticmethod
    def _signal(transport: asyncio.SubprocessTransport, signum: int) -> None:
        pid = transport.get_pid()
        killpg = getattr(os, "killpg", None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if killpg is not None:
                killpg(pid, signum)
            else:
                transport.send_signal(signum)

    # -- internals ------------------------------------------------------------------------

    def _on_line(self, line: bytes, since: int, now: int) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        try:
            message = decode_message(line)
        except ProtocolError:
            self._skipped += 1
            return
        if message.method is not msgspec.UNSET or message.id != self._request_id:
            self._skipped += 1
            return
        waiter.set_result(Line(line, since, now, self._skipped))

    def _fail(self, exc: BaseException) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _why(self) -> str:
        code = self.transport.get_returncode() if self.transport is not None else None
        status = f" (exit status {code})" if code is not None else ""
        tail = self.stderr_tail.decode("utf-8", "replace").strip()
        return f"{status}; stderr: {tail[-500:]}" if tail else status


async def spawn_timed(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> TimedProcess:
    """Start ``command`` with pipes on stdin, stdout and stderr, in a session of its own."""
    loop = asyncio.get_running_loop()
    protocol = TimedProcess(max_line_bytes)
    try:
        await loop.subprocess_exec(
            lambda: protocol,
            *command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=sys.platform != "win32",
        )
    except OSError as exc:
        raise NotSent(f"could not start {' '.join(command)!r}: {exc}") from exc
    return protocol
