"""The stdio link: one server as a subprocess speaking newline-delimited JSON-RPC.

:class:`StdioLink` starts the server with its stdin and stdout as pipes and moves one
message per line each way (the MCP stdio transport; both eras look the same on the wire).

- **Reading.** The process's stdout is read by the event loop's pipe protocol, not by a task:
  each complete line is decoded where it arrives (one hop fewer per response). A response
  resolves the waiting :meth:`~StdioLink.request` by its id; anything else (notifications,
  server-to-client requests) goes to :meth:`~StdioLink.unsolicited`. A line that is not
  JSON-RPC is logged and skipped.
- **Oversized lines.** A line longer than ``max_line_bytes`` is discarded as it streams in (it
  is never held whole) and logged. When its id can be read from the first or last bytes of
  the line (``{"jsonrpc":"2.0","id":7,...`` or ``...,"id":7}``) and a request with that id is
  waiting, that request fails with :class:`~millimcp.errors.FrameTooLarge`; other requests go
  on. An oversized line whose id cannot be recovered only costs the request its deadline.
- **Backpressure.** Unsolicited messages wait in a bounded queue (``max_unsolicited``); when
  it is full the oldest *notification* is dropped (with a warning), never a server-to-client
  request, which would leave the server waiting forever. The reader never blocks.
- **stderr** is drained continuously into a bounded tail (``stderr_tail``, kept for error
  messages) and logged line by line at DEBUG on the ``millimcp.client.stdio`` logger, so a
  chatty server never stalls on a full pipe.
- **Environment.** The process gets :func:`default_environment` (a short list of safe
  variables of ours: ``PATH``, ``HOME``, ``USER``, locale...; the official SDKs pass the same
  kind of list) updated with ``env``. Nothing else leaks from this process's environment:
  pass ``env={**os.environ}`` to inherit everything.
- **Errors.** A process that cannot be started, or a request written after the process or
  its stdout ended, raises :class:`~millimcp.errors.NotSent`. Once a line was written, the
  end of stdout (process exit) raises :class:`~millimcp.errors.ConnectionLost` for every
  waiting request: it may have been read. Both carry the exit status and the tail of stderr.
- **Cancellation.** Cancelling a task waiting in :meth:`~StdioLink.request` sends
  ``notifications/cancelled`` with that request id (reason: the cancel message when there is
  one, else ``"cancelled by client"``); a late response is dropped.
- **Closing.** :meth:`~StdioLink.close` closes stdin, gives the process ``close_grace_s`` to
  exit, then sends SIGTERM, then SIGKILL (to its process group: it runs in a session of its
  own, so helpers it spawned go too), and waits until it is reaped.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final, Literal, cast

import msgspec

from millimcp.client.link import OnMessage, Reply
from millimcp.errors import ClientError, ConnectionLost, FrameTooLarge, NotSent, ProtocolError
from millimcp.protocol import Message, decode_message, encode_notification

__all__ = ["StdioLink", "default_environment"]

log: Final = logging.getLogger("millimcp.client.stdio")

_POSIX_INHERITED: Final = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
)
_WINDOWS_INHERITED: Final = (
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
)
_SALVAGE_BYTES: Final = 256
_ID = rb'(-?\d+|"(?:[^"\\]|\\.){0,200}")'
_ID_AT_START: Final = re.compile(
    rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID + rb"\s*[,}]"
)
_ID_AT_END: Final = re.compile(rb'"id"\s*:\s*' + _ID + rb"\s*\}\s*\Z")
_STDERR_LOG_LINE: Final = 4096


def default_environment() -> dict[str, str]:
    """The variables a server inherits from this process unless ``env`` says otherwise.

    Only a short list (``PATH``, ``HOME``, ``USER``, ``SHELL``, ``TERM``, locale and temp
    directory variables; their Windows equivalents there), and no value that looks like an
    exported shell function (``() {``), so secrets in this process's environment stay here.
    """
    names = _WINDOWS_INHERITED if sys.platform == "win32" else _POSIX_INHERITED
    found: dict[str, str] = {}
    for name in names:
        value = os.environ.get(name)
        if value is not None and not value.startswith("()"):
            found[name] = value
    return found


def salvage_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of a discarded line, from its first and last bytes, when it shows plainly.

    Only a top-level id is read: the first key (after ``"jsonrpc"``) or the last one (a
    nested ``"id"`` at the end of a line is followed by more than one ``}``).
    """
    match = _ID_AT_START.match(head) or _ID_AT_END.search(tail)
    if match is None:
        return None
    try:
        found = msgspec.json.decode(match.group(1))
    except msgspec.DecodeError:
        return None
    return found if isinstance(found, int | str) else None


class _LineSplitter:
    """Cuts a byte stream into lines; a line over ``limit`` is dropped as it streams."""

    __slots__ = ("_buffer", "_discarding", "_head", "_limit", "_link", "_tail")

    def __init__(self, link: StdioLink, limit: int) -> None:
        self._link = link
        self._limit = limit
        self._buffer = bytearray()
        self._discarding = False
        self._head = b""
        self._tail = b""

    def feed(self, data: bytes) -> None:
        link = self._link
        if self._discarding:
            end = data.find(b"\n")
            if end < 0:
                self._tail = (self._tail + data[-_SALVAGE_BYTES:])[-_SALVAGE_BYTES:]
                return
            self._tail = (self._tail + data[max(0, end - _SALVAGE_BYTES) : end])[-_SALVAGE_BYTES:]
            self._discarding = False
            link._oversized(self._head, self._tail)
            data = data[end + 1 :]
        buffer = self._buffer
        if not buffer and data.endswith(b"\n") and data.count(b"\n") == 1:
            line = data[:-1]
            if len(line) > self._limit:
                link._oversized(line[:_SALVAGE_BYTES], line[-_SALVAGE_BYTES:])
            elif line.strip():
                link._line(line)
            return
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            if end - start > self._limit:
                link._oversized(
                    bytes(buffer[start : start + _SALVAGE_BYTES]),
                    bytes(buffer[max(start, end - _SALVAGE_BYTES) : end]),
                )
            else:
                line = bytes(buffer[start:end])
                if line.strip():
                    link._line(line)
            start = end + 1
        del buffer[:start]
        if len(buffer) > self._limit:
            self._head = bytes(buffer[:_SALVAGE_BYTES])
            self._tail = bytes(buffer[-_SALVAGE_BYTES:])
            buffer.clear()
            self._discarding = True


class _Pipes(asyncio.SubprocessProtocol):
    """The event loop's callbacks for the process, passed on to the link."""

    def __init__(self, link: StdioLink) -> None:
        self._link = link

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self._link._stdout.feed(data)
        else:
            self._link._stderr_received(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._link._stdout_ended()
        elif fd == 0:
            self._link._wake_writers()

    def process_exited(self) -> None:
        self._link._process_exited()

    def pause_writing(self) -> None:
        self._link._paused = True

    def resume_writing(self) -> None:
        self._link._paused = False
        self._link._wake_writers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._link._transport_closed()


class _Unsolicited:
    """The async iterator over the link's unsolicited messages."""

    def __init__(self, link: StdioLink) -> None:
        self._link = link

    def __aiter__(self) -> _Unsolicited:
        return self

    async def __anext__(self) -> Message:
        link = self._link
        while True:
            if link._inbox:
                return link._inbox.popleft()
            if link._inbox_ended:
                raise StopAsyncIteration
            waiter = asyncio.get_running_loop().create_future()
            link._inbox_waiter = waiter
            try:
                await waiter
            finally:
                link._inbox_waiter = None


class StdioLink:
    """A :class:`~millimcp.client.link.Link` to a server run as a subprocess over stdio."""

    kind: Literal["http", "stdio"] = "stdio"

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        max_line_bytes: int = 4 * 1024 * 1024,
        max_unsolicited: int = 1024,
        stderr_tail_bytes: int = 64 * 1024,
        close_grace_s: float = 2.0,
    ) -> None:
        self.command = command
        self.args = list(args)
        self.env = {**default_environment(), **(env or {})}
        self.cwd = cwd
        self.max_line_bytes = max_line_bytes
        self.max_unsolicited = max_unsolicited
        self.stderr_tail_bytes = stderr_tail_bytes
        self.close_grace_s = close_grace_s
        self.dropped_notifications = 0
        """How many notifications were dropped because nobody read :meth:`unsolicited`."""
        self._transport: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._stdout = _LineSplitter(self, max_line_bytes)
        self._stderr = bytearray()
        self._stderr_partial = bytearray()
        self._pending: dict[int | str, asyncio.Future[Reply]] = {}
        self._inbox: collections.deque[Message] = collections.deque()
        self._inbox_ended = False
        self._inbox_waiter: asyncio.Future[None] | None = None
        self._overflowing = False
        self._paused = False
        self._writers: list[asyncio.Future[None]] = []
        self._exited: asyncio.Future[None] | None = None
        self._finished: asyncio.Future[None] | None = None
        self._eof = False
        self._state: Literal["new", "open", "closing", "closed"] = "new"
        self._closed = asyncio.Event()

    def __repr__(self) -> str:
        return (
            f"<StdioLink {self._state} {self.command!r} pid={self.pid} "
            f"pending={len(self._pending)} queued={len(self._inbox)}>"
        )

    # -- the Link interface -----------------------------------------------------------------

    async def open(self) -> None:
        """Start the process. Raises NotSent when it cannot be started."""
        if self._state != "new":
            raise ClientError(f"this stdio link is {self._state} already")
        loop = asyncio.get_running_loop()
        self._exited = loop.create_future()
        self._finished = loop.create_future()
        try:
            transport, _ = await loop.subprocess_exec(
                lambda: _Pipes(self),
                self.command,
                *self.args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=sys.platform != "win32",
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self._state = "closed"
            self._inbox_ended = True
            self._closed.set()
            raise NotSent(f"could not start {self.command!r}: {exc}") from exc
        self._transport = transport
        # uvloop's pipe transports do not subclass asyncio's; they have the same methods.
        self._stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
        self._state = "open"

    async def request(
        self,
        request_id: int | str,
        body: bytes,
        *,
        headers: Mapping[str, str],
        on_message: OnMessage,
    ) -> Reply:
        """Write the request and wait for the response with its id (``headers`` and
        ``on_message`` are unused: over stdio every other message is unsolicited)."""
        stdin = self._writable()
        if request_id in self._pending:
            raise ClientError(f"request id {request_id!r} is already in flight on this link")
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        stdin.write(body + b"\n")
        try:
            if self._paused:
                await self._drain()
            return await future
        except asyncio.CancelledError as exc:
            if self._pending.get(request_id) is future:
                del self._pending[request_id]
                reason = exc.args[0] if exc.args and isinstance(exc.args[0], str) else None
                self._cancel_on_server(request_id, reason or "cancelled by client")
            elif future.done() and not future.cancelled():
                future.exception()  # retrieved: the caller is gone
            raise

    async def send(self, body: bytes, *, headers: Mapping[str, str]) -> None:
        """Write one message that has no response."""
        self._writable().write(body + b"\n")
        if self._paused:
            await self._drain()

    def unsolicited(self) -> AsyncIterator[Message]:
        """Every message that is not a response, in arrival order; ends when stdout ends
        (after what was queued) or at once when the link closes."""
        return _Unsolicited(self)

    @property
    def session_id(self) -> str | None:
        return None

    def reset_session(self) -> None:
        """Nothing to forget: a stdio connection has no session id."""

    async def close(self) -> None:
        """Close stdin, wait ``close_grace_s`` for the exit, then SIGTERM, then SIGKILL."""
        if self._state in ("closing", "closed"):
            await self._closed.wait()
            return
        self._state = "closing"
        try:
            if self._transport is not None:
                await self._stop_process(self._transport)
        finally:
            self._fail_pending(ConnectionLost(self._ended_message("the link was closed")))
            self._end_inbox(drop_queued=True)
            self._wake_writers()
            self._state = "closed"
            self._closed.set()

    # -- introspection ----------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._transport.get_pid() if self._transport is not None else None

    @property
    def returncode(self) -> int | None:
        return self._transport.get_returncode() if self._transport is not None else None

    def stderr_tail(self) -> str:
        """The last ``stderr_tail_bytes`` the process wrote to stderr (decoded leniently)."""
        return self._stderr.decode("utf-8", "replace")

    # -- writing ----------------------------------------------------------------------------

    def _writable(self) -> asyncio.WriteTransport:
        stdin = self._stdin
        if self._state == "new":
            raise NotSent("the stdio link is not open")
        if self._state != "open" or stdin is None:
            raise NotSent("the stdio link is closed")
        if stdin.is_closing() or self._eof or self.returncode is not None:
            raise NotSent(self._ended_message("the server process is gone"))
        return stdin

    async def _drain(self) -> None:
        """Wait while the pipe to the server is full (it is not reading its stdin)."""
        while self._paused and self._state == "open":
            stdin = self._stdin
            if stdin is None or stdin.is_closing():
                return
            waiter = asyncio.get_running_loop().create_future()
            self._writers.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    self._writers.remove(waiter)

    def _wake_writers(self) -> None:
        for waiter in self._writers:
            if not waiter.done():
                waiter.set_result(None)
        self._writers.clear()

    def _cancel_on_server(self, request_id: int | str, reason: str) -> None:
        stdin = self._stdin
        if self._state != "open" or stdin is None or stdin.is_closing() or self._eof:
            return
        params = {"requestId": request_id, "reason": reason}
        stdin.write(encode_notification("notifications/cancelled", params) + b"\n")

    # -- reading (called by _Pipes and _LineSplitter) ----------------------------------------

    def _line(self, line: bytes) -> None:
        try:
            message = decode_message(line)
        except ProtocolError as exc:
            log.warning("stdio server %r sent a line that is not JSON-RPC: %s", self.command, exc)
            return
        if message.method is msgspec.UNSET:
            request_id = message.id
            future = (
                self._pending.pop(request_id, None) if isinstance(request_id, int | str) else None
            )
            if future is None:
                log.debug("dropped a response to no waiting request (id %r)", request_id)
            elif not future.done():
                future.set_result(Reply(message))
            return
        self._enqueue(message)

    def _oversized(self, head: bytes, tail: bytes) -> None:
        request_id = salvage_id(head, tail)
        future = self._pending.pop(request_id, None) if request_id is not None else None
        log.warning(
            "stdio server %r sent a line over %d bytes; discarded (id %r%s)",
            self.command,
            self.max_line_bytes,
            request_id,
            ", its request fails" if future is not None else "",
        )
        if future is not None and not future.done():
            future.set_exception(FrameTooLarge(self.max_line_bytes))

    def _enqueue(self, message: Message) -> None:
        if self._inbox_ended:
            return
        inbox = self._inbox
        if len(inbox) >= self.max_unsolicited:
            if self._drop_oldest_notification(message):
                return
        elif self._overflowing and len(inbox) < self.max_unsolicited // 2:
            self._overflowing = False
        inbox.append(message)
        waiter = self._inbox_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _drop_oldest_notification(self, arriving: Message) -> bool:
        """Make room by dropping the oldest queued notification; True when it is
        ``arriving`` itself that is dropped (nothing older to drop). A server-to-client
        request is never dropped: the queue grows past its bound for it."""
        waiting = len(self._inbox)
        dropped: Message | None = None
        for index, queued in enumerate(self._inbox):
            if queued.id is msgspec.UNSET:
                dropped = queued
                del self._inbox[index]
                break
        if dropped is None and arriving.id is msgspec.UNSET:
            dropped = arriving
        if dropped is None:
            return False
        self.dropped_notifications += 1
        if not self._overflowing:
            self._overflowing = True
            log.warning(
                "stdio server %r: %d unsolicited messages are waiting to be read; dropping "
                "the oldest notifications (first: %s)",
                self.command,
                waiting,
                dropped.method,
            )
        return dropped is arriving

    def _end_inbox(self, *, drop_queued: bool) -> None:
        self._inbox_ended = True
        if drop_queued:
            self._inbox.clear()
        waiter = self._inbox_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _stderr_received(self, data: bytes) -> None:
        tail = self._stderr
        tail += data
        if len(tail) > self.stderr_tail_bytes:
            del tail[: len(tail) - self.stderr_tail_bytes]
        if not log.isEnabledFor(logging.DEBUG):
            return
        partial = self._stderr_partial
        partial += data
        *lines, rest = partial.split(b"\n")
        for line in lines:
            log.debug(
                "stderr of %r: %s", self.command, line[:_STDERR_LOG_LINE].decode(errors="replace")
            )
        self._stderr_partial = rest[-_STDERR_LOG_LINE:]

    def _stdout_ended(self) -> None:
        self._eof = True
        self._fail_pending(ConnectionLost(self._ended_message("the server closed its stdout")))
        self._end_inbox(drop_queued=False)
        self._wake_writers()

    def _process_exited(self) -> None:
        if self._exited is not None and not self._exited.done():
            self._exited.set_result(None)

    def _transport_closed(self) -> None:
        if self._finished is not None and not self._finished.done():
            self._finished.set_result(None)

    def _fail_pending(self, error: ConnectionLost) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    def _ended_message(self, what: str) -> str:
        parts = [f"{what} ({self.command!r}"]
        if (code := self.returncode) is not None:
            parts.append(f", exit status {code}")
        parts.append(")")
        stderr = self.stderr_tail().strip()
        if stderr:
            parts.append(f"; stderr ends with: {stderr[-1000:]}")
        return "".join(parts)

    # -- closing ----------------------------------------------------------------------------

    async def _stop_process(self, transport: asyncio.SubprocessTransport) -> None:
        assert self._exited is not None
        assert self._finished is not None
        if self._stdin is not None:
            self._stdin.close()  # EOF once what is buffered is written
        if not await _wait(self._exited, self.close_grace_s):
            self._signal(signal.SIGTERM)
            if not await _wait(self._exited, self.close_grace_s):
                self._signal(getattr(signal, "SIGKILL", signal.SIGTERM))
                await _wait(self._exited, 10.0)
        transport.close()
        await _wait(self._finished, self.close_grace_s)

    def _signal(self, signum: int) -> None:
        """Signal the process group (the process and what it started); else the process."""
        transport = self._transport
        if transport is None or transport.get_returncode() is not None:
            return
        pid = transport.get_pid()
        killpg = getattr(os, "killpg", None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if killpg is not None:
                killpg(pid, signum)
                return
            transport.send_signal(signum)


async def _wait(future: asyncio.Future[Any], seconds: float) -> bool:
    """Wait for ``future`` up to ``seconds`` without cancelling it."""
    if future.done():
        return True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(future), seconds)
    return future.done()
