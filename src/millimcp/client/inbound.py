"""What the server sends besides responses: progress, log messages, notifications, and its
own requests to the client.

Such messages come on a request's HTTP response stream (handed over by the link's
``on_message``) or outside any request (the handshake era's GET stream, and everything over
stdio: the pump reads :meth:`~millimcp.client.link.Link.unsolicited`). Either way
:meth:`Inbound.on_message` routes each one:

- ``notifications/progress``: to the call that chose its ``progressToken`` (its
  ``on_progress``; its deadline is extended when it resets on progress);
- ``notifications/message``: to the ``millimcp.client.server`` logger, at the level the
  server gave;
- a server-to-client request (``elicitation/create``, ``sampling/createMessage``,
  ``roots/list``, ``ping``): answered by the client's handlers, the answer sent back with
  :meth:`~millimcp.client.link.Link.send`;
- any other notification (list changes, resource updates, subscription acknowledgements):
  first to :attr:`Inbound.on_notification` (the list cache), then to the stream it belongs to
  (the request's own response stream, or the one whose request id its ``_meta`` names as
  ``io.modelcontextprotocol/subscriptionId``) when that stream is open, else to every
  :class:`NotificationSink` in :attr:`Inbound.sinks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import msgspec

from millimcp.client.envelope import Envelope
from millimcp.client.handlers import Handlers
from millimcp.client.link import Link
from millimcp.codec import encode
from millimcp.errors import InternalError, NotSent, ProtocolError, RequestRejected
from millimcp.protocol import Message, encode_error
from millimcp.protocol.types import META_SUBSCRIPTION_ID, LoggingMessageParams, ProgressParams
from millimcp.resilience.deadline import Deadline

__all__ = ["Inbound", "Inbox", "NotificationSink", "OnProgress", "subscription_of"]

log: Final = logging.getLogger("millimcp.client")
server_log: Final = logging.getLogger("millimcp.client.server")

OnProgress = Callable[[float, float | None, str | None], Awaitable[None] | None]
"""``on_progress(progress, total, message)``: a plain or an async function."""

Inbox = asyncio.Queue[Message]
"""Where the messages of one open stream wait for its reader."""

_UNSET: Final[Any] = msgspec.UNSET
_PROGRESS: Final = msgspec.json.Decoder(ProgressParams)
_SERVER_LOG: Final = msgspec.json.Decoder(LoggingMessageParams)
_LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class NotificationSink(Protocol):
    """Something that takes the notifications the server starts (a subscription)."""

    def offer(self, method: str, params: Any, subscription_id: Any) -> None:
        """One notification: ``params`` decoded to builtins (or None), ``subscription_id``
        the ``_meta`` subscription id it carries (or None). Must not block."""

    async def aclose(self) -> None:
        """The client is closing: end (idempotent)."""


def subscription_of(params: Any) -> Any:
    """The subscription id a notification's ``_meta`` names, if any."""
    if isinstance(params, dict):
        meta = params.get("_meta")
        if isinstance(meta, dict):
            return meta.get(META_SUBSCRIPTION_ID)
    return None


class Inbound:
    """The router of one client's inbound traffic, and the pump of its unsolicited stream."""

    def __init__(self, link: Link, envelope: Envelope, handlers: Handlers) -> None:
        self.link = link
        self.envelope = envelope
        self.handlers = handlers
        self.sinks: set[NotificationSink] = set()
        """Where notifications that belong to no open stream go."""
        self.streams: dict[int | str, Inbox] = {}
        """The open streams by request id (for notifications that name it)."""
        self.on_notification: Callable[[str], None] | None = None
        """Called with the method of every notification the server starts, before anyone
        else gets it (the list cache drops what a ``list_changed`` names)."""
        self._progress: dict[int | str, tuple[OnProgress | None, Deadline]] = {}
        self._tokens = itertools.count(1)
        self._pump: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def __repr__(self) -> str:
        return (
            f"<Inbound sinks={len(self.sinks)} streams={len(self.streams)} "
            f"progress={len(self._progress)} pumping={self.pumping}>"
        )

    # -- progress ---------------------------------------------------------------------------

    def track_progress(self, on_progress: OnProgress | None, deadline: Deadline) -> int:
        """A fresh ``progressToken`` whose notifications go to ``on_progress`` and extend
        ``deadline``; :meth:`untrack_progress` it when the call ends."""
        token = next(self._tokens)
        self._progress[token] = (on_progress, deadline)
        return token

    def untrack_progress(self, token: int) -> None:
        del self._progress[token]

    # -- the pump ---------------------------------------------------------------------------

    @property
    def pumping(self) -> bool:
        """Whether the unsolicited stream is being read."""
        return self._pump is not None

    def start_pump(self) -> None:
        """Read what the server starts outside requests (stdio; HTTP: the GET stream)."""
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._read_unsolicited())

    def stop_pump(self) -> None:
        """Stop reading the unsolicited stream (its session ended)."""
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None

    async def open_stream(self, wait_s: float) -> None:
        """Start the pump and wait until the unsolicited stream is up (or refused), at most
        ``wait_s`` seconds."""
        self.start_pump()
        pump = self._pump
        ready = self.link.stream_ready
        if pump is None or ready.is_set():
            return
        waiter = asyncio.ensure_future(ready.wait())
        try:
            await asyncio.wait({waiter, pump}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()

    async def close(self) -> None:
        """Stop the pump and the answers in progress."""
        tasks = [t for t in (self._pump, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self._pump = None
        self._tasks.clear()

    async def _read_unsolicited(self) -> None:
        async for message in self.link.unsolicited():
            if message.method is _UNSET:
                continue
            if message.id is _UNSET:
                await self._notified(message, None)
            else:  # answered beside the pump, which goes on reading
                task = asyncio.get_running_loop().create_task(self._answer_request(message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    # -- routing ----------------------------------------------------------------------------

    async def on_message(self, message: Message, stream: Inbox | None = None) -> None:
        """A message that is not a response, on a request's stream (``stream``: that
        request's open stream, if it is one) or on the unsolicited one."""
        if message.id is _UNSET:
            await self._notified(message, stream)
        else:
            await self._answer_request(message)

    async def _notified(self, message: Message, stream: Inbox | None) -> None:
        method = message.method
        if method == "notifications/progress":
            await self._progressed(message.params)
        elif method == "notifications/message":
            self._server_logged(message.params)
        elif method != "notifications/cancelled":
            assert isinstance(method, str)
            self._notify(method, message, stream)

    def _notify(self, method: str, message: Message, stream: Inbox | None) -> None:
        if self.on_notification is not None:
            self.on_notification(method)
        if stream is not None:
            stream.put_nowait(message)
            return
        if not self.sinks and not self.streams:
            return
        raw = message.params
        try:
            params = msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            params = None
        subscription = subscription_of(params)
        if subscription is not None:
            owner = self.streams.get(subscription)
            if owner is not None:
                owner.put_nowait(message)
                return
        for sink in tuple(self.sinks):
            sink.offer(method, params, subscription)

    async def _progressed(self, raw: msgspec.Raw) -> None:
        try:
            progress = _PROGRESS.decode(raw or b"{}")
        except msgspec.DecodeError:
            return
        entry = self._progress.get(progress.progress_token)
        if entry is None:
            return
        callback, deadline = entry
        deadline.extend_on_progress()
        if callback is None:
            return
        try:
            outcome = callback(progress.progress, progress.total, progress.message)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            log.exception("the on_progress callback failed")

    @staticmethod
    def _server_logged(raw: msgspec.Raw) -> None:
        try:
            entry = _SERVER_LOG.decode(raw or b"{}")
        except msgspec.DecodeError:
            return
        level = _LOG_LEVELS.get(entry.level, logging.INFO)
        if server_log.isEnabledFor(level):
            server_log.log(level, "%s%s", f"[{entry.logger}] " if entry.logger else "", entry.data)

    async def _answer_request(self, message: Message) -> None:
        """A server-to-client request (handshake era): run the handler, send the answer."""
        request_id = message.id
        assert isinstance(request_id, int | str)
        assert isinstance(message.method, str)
        try:
            answer = await self.handlers.answer_method(message.method, bytes(message.params))
            body = b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (encode(request_id), answer)
        except ProtocolError as exc:
            body = encode_error(request_id, exc)
        except Exception:
            log.exception("the client's %s handler failed", message.method)
            body = encode_error(request_id, InternalError("the client's handler failed"))
        try:
            await self.link.send(body, headers=self.envelope.headers_for("", None))
        except (NotSent, RequestRejected, ConnectionError, OSError) as exc:
            log.warning("could not answer the server's %s: %r", message.method, exc)
