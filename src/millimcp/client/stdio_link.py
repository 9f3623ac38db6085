"""The stdio link: one server as a subprocess speaking newline-delimited JSON-RPC.

:class:`StdioLink` starts the server (:class:`~millimcp.client.stdio_process.ServerProcess`:
environment, stderr, the stop sequence) and moves one message per line each way (the MCP
stdio transport; both eras look the same on the wire).

- **Reading.** The process's stdout is read by the event loop's pipe protocol, not by a task:
  each complete line (:class:`~millimcp.client.stdio_lines.LineSplitter`) is decoded where it
  arrives (one hop fewer per response). A response resolves the waiting
  :meth:`~StdioLink.request` by its id; anything else (notifications, server-to-client
  requests) goes to :meth:`~StdioLink.unsolicited`. A line that is not JSON-RPC is logged and
  skipped.
- **Oversized lines.** A line longer than ``max_line_bytes`` is discarded as it streams in and
  logged. When its id can be read from its first or last bytes and a request with that id is
  waiting, that request fails with :class:`~millimcp.errors.FrameTooLarge`; other requests go
  on. An oversized line whose id cannot be recovered only costs the request its deadline.
- **Backpressure.** Unsolicited messages wait in a bounded queue (``max_unsolicited``); when
  it is full the oldest *notification* is dropped (with a warning), never a server-to-client
  request, which would leave the server waiting forever. The reader never blocks.
- **Errors.** A process that cannot be started, or a request written after the process or
  its stdout ended, raises :class:`~millimcp.errors.NotSent`. Once a line was written, the
  end of stdout (process exit) raises :class:`~millimcp.errors.ConnectionLost` for every
  waiting request: it may have been read. Both carry the exit status and the tail of stderr.
- **Cancellation.** Cancelling a task waiting in :meth:`~StdioLink.request` sends
  ``notifications/cancelled`` with that request id (reason: the cancel message when there is
  one, else ``"cancelled by client"``); a late response is dropped.
- **Closing.** :meth:`~StdioLink.close` stops the process (stdin closed, ``close_grace_s``,
  SIGTERM, SIGKILL to its process group) and waits until it is reaped.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Final, Literal

import msgspec

from millimcp.client.link import Attachment, OnMessage, Reply
from millimcp.client.stdio_lines import LineSplitter, salvage_id
from millimcp.client.stdio_process import ServerProcess
from millimcp.errors import ClientError, ConnectionLost, FrameTooLarge, NotSent, ProtocolError
from millimcp.protocol import Message, decode_message, encode_notification

__all__ = ["StdioLink"]

log: Final = logging.getLogger("millimcp.client.stdio")


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
        self.process = ServerProcess(
            command,
            args,
            env=env,
            cwd=cwd,
            stderr_tail_bytes=stderr_tail_bytes,
            close_grace_s=close_grace_s,
        )
        self.command = command
        self.max_line_bytes = max_line_bytes
        self.max_unsolicited = max_unsolicited
        self.dropped_notifications = 0
        """How many notifications were dropped because nobody read :meth:`unsolicited`."""
        self.stream_ready = asyncio.Event()
        """Set from open until stdout ends or the link closes."""
        self._stdout = LineSplitter(max_line_bytes, self._line, self._oversized)
        self._pending: dict[int | str, asyncio.Future[Reply]] = {}
        self._inbox: collections.deque[Message] = collections.deque()
        self._inbox_ended = False
        self._inbox_waiter: asyncio.Future[None] | None = None
        self._overflowing = False
        self._paused = False
        self._writers: list[asyncio.Future[None]] = []
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
        try:
            await self.process.start(self)
        except NotSent:
            self._state = "closed"
            self._inbox_ended = True
            self._closed.set()
            raise
        self._state = "open"
        if not self._eof:
            self.stream_ready.set()

    async def request(
        self,
        request_id: int | str,
        body: bytes,
        *,
        headers: Mapping[str, str],
        on_message: OnMessage,
        attachment: Attachment | None = None,
    ) -> Reply:
        """Write the request and wait for the response with its id (``headers`` and
        ``on_message`` are unused: over stdio every other message is unsolicited). Lines
        carry no attachment: passing one is a :class:`~millimcp.errors.ClientError`."""
        if attachment is not None:
            raise ClientError("a stdio link sends no binary attachment (HTTP only)")
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
        """Stop the process: stdin closed, ``close_grace_s`` for the exit, SIGTERM, SIGKILL."""
        if self._state in ("closing", "closed"):
            await self._closed.wait()
            return
        self._state = "closing"
        self.stream_ready.clear()
        try:
            await self.process.stop()
        finally:
            self._fail_pending(ConnectionLost(self.process.ended_message("the link was closed")))
            self._end_inbox(drop_queued=True)
            self._wake_writers()
            self._state = "closed"
            self._closed.set()

    # -- introspection ----------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def stderr_tail(self) -> str:
        """The last ``stderr_tail_bytes`` the process wrote to stderr (decoded leniently)."""
        return self.process.stderr_tail()

    # -- writing ----------------------------------------------------------------------------

    def _writable(self) -> asyncio.WriteTransport:
        stdin = self.process.stdin
        if self._state == "new":
            raise NotSent("the stdio link is not open")
        if self._state != "open" or stdin is None:
            raise NotSent("the stdio link is closed")
        if stdin.is_closing() or self._eof or self.returncode is not None:
            raise NotSent(self.process.ended_message("the server process is gone"))
        return stdin

    async def _drain(self) -> None:
        """Wait while the pipe to the server is full (it is not reading its stdin)."""
        while self._paused and self._state == "open":
            stdin = self.process.stdin
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
        stdin = self.process.stdin
        if self._state != "open" or stdin is None or stdin.is_closing() or self._eof:
            return
        params = {"requestId": request_id, "reason": reason}
        stdin.write(encode_notification("notifications/cancelled", params) + b"\n")

    # -- what the pipes do (PipeListener) ----------------------------------------------------

    def stdout_received(self, data: bytes) -> None:
        self._stdout.feed(data)

    def stdout_ended(self) -> None:
        self._eof = True
        self.stream_ready.clear()
        message = self.process.ended_message("the server closed its stdout")
        self._fail_pending(ConnectionLost(message))
        self._end_inbox(drop_queued=False)
        self._wake_writers()

    def stdin_changed(self, *, paused: bool | None) -> None:
        if paused is not None:
            self._paused = paused
        if not paused:
            self._wake_writers()

    # -- reading ----------------------------------------------------------------------------

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

    def _fail_pending(self, error: ConnectionLost) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
