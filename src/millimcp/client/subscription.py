"""Subscriptions: the notifications a server starts (list changes, resource updates).

Modern era: one ``subscriptions/listen`` request whose response stream stays open and
carries the notifications the filter asked for (the server first sends
``notifications/subscriptions/acknowledged``); closing the subscription closes the stream
(HTTP) or cancels the request (stdio). Handshake era: ``resources/subscribe`` for each URI
and the session's GET stream, which carries every list change; closing sends
``resources/unsubscribe``.

Either way a :class:`Subscription` is an async iterator of
:class:`~millimcp.client.results.Notification`; ``async with`` waits until it is live (so a
change made inside the block is not missed) and closes it at the end. It reaches the client
only through the narrow :class:`SubscriptionHost` interface: requests go through the client's
call pipeline (gate, deadline, retries), notifications come to it as a
:class:`~millimcp.client.inbound.NotificationSink`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Sequence
from types import TracebackType
from typing import Any, Final, Protocol

import msgspec

from millimcp.client.inbound import NotificationSink
from millimcp.client.results import Notification
from millimcp.errors import ClientError
from millimcp.protocol import Message
from millimcp.protocol.eras import Era

__all__ = ["Subscription", "SubscriptionHost"]

log: Final = logging.getLogger("millimcp.client")

_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
_END: Final[Any] = object()
_MAX_QUEUED: Final = 1024
_FLAGS: Final = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}


class SubscriptionHost(Protocol):
    """What a subscription needs of the client."""

    @property
    def era(self) -> Era | None:
        """The era in use (the subscription mechanism differs)."""
        ...

    @property
    def sinks(self) -> set[NotificationSink]:
        """Where notifications that belong to no open stream go; a subscription is in it
        while it is live, and the client closes every one in it when it closes."""
        ...

    def stream(self, method: str, params: dict[str, Any]) -> AsyncGenerator[Message, None]:
        """A request through the call pipeline; the messages the server sends for it, until
        its response (see :meth:`millimcp.client.pipeline.Pipeline.stream`)."""
        ...

    async def open_unsolicited(self) -> None:
        """Make sure what the server starts outside requests is read (handshake era over
        HTTP: the session's GET stream is up, or refused, within the connect timeout)."""
        ...


class Subscription:
    """One subscription; iterate it for notifications, close it when done."""

    def __init__(
        self,
        host: SubscriptionHost,
        *,
        tools_list_changed: bool = False,
        prompts_list_changed: bool = False,
        resources_list_changed: bool = False,
        resources: Sequence[str] = (),
    ) -> None:
        self._host = host
        self._filter: dict[str, Any] = {}
        for flag, wanted in (
            ("toolsListChanged", tools_list_changed),
            ("promptsListChanged", prompts_list_changed),
            ("resourcesListChanged", resources_list_changed),
        ):
            if wanted:
                self._filter[flag] = True
        self.resources = tuple(resources)
        if self.resources:
            self._filter["resourceSubscriptions"] = list(self.resources)
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._messages: AsyncGenerator[Message, None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._subscribed: tuple[str, ...] = ()
        self._started = False
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "live" if self._started else "new"
        return f"<Subscription {self._filter} {state} queued={self._queue.qsize()}>"

    # -- use ------------------------------------------------------------------------------

    async def __aenter__(self) -> Subscription:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Notification:
        if not self._started:
            await self.start()
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)  # every later call ends too
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        note: Notification = item
        return note

    async def start(self) -> None:
        """Open the subscription and wait until the server has it: acknowledged (modern,
        within the client's timeout), or subscribed with the GET stream up (handshake, the
        stream waited for at most the client's connect timeout)."""
        if self._started:
            return
        self._started = True
        host = self._host
        host.sinks.add(self)
        try:
            if host.era == "modern":
                await self._listen()
            else:
                await self._subscribe_handshake()
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """End the subscription (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._host.sinks.discard(self)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        messages, self._messages = self._messages, None
        if messages is not None:
            with contextlib.suppress(Exception):
                await messages.aclose()
        for uri in self._subscribed:
            with contextlib.suppress(Exception):
                await _request(self._host, "resources/unsubscribe", {"uri": uri})
        self._queue.put_nowait(_END)

    # -- what the client hands over -------------------------------------------------------

    def offer(self, method: str, params: Any, subscription_id: Any) -> None:
        """A notification that belongs to no open stream: keep it if this subscription
        asked for it (one naming a subscription is another's, whose stream has ended)."""
        if subscription_id is None:
            self._keep(method, params)

    def _keep(self, method: str, params: Any) -> None:
        if self._closed:
            return
        flag = _FLAGS.get(method)
        if flag is not None:
            wanted = self._filter.get(flag, False)
        elif method == "notifications/resources/updated":
            uri = params.get("uri") if isinstance(params, dict) else None
            wanted = uri in self.resources
        else:
            wanted = False
        if not wanted:
            return
        if self._queue.qsize() >= _MAX_QUEUED:
            dropped = self._queue.get_nowait()
            log.warning("subscription queue full: dropped %s", getattr(dropped, "method", "?"))
        self._queue.put_nowait(Notification(method, params))

    # -- modern: subscriptions/listen -----------------------------------------------------

    async def _listen(self) -> None:
        messages = self._host.stream("subscriptions/listen", {"notifications": self._filter})
        self._messages = messages
        try:
            first = await anext(messages)
        except StopAsyncIteration:
            raise ClientError("the server ended the subscription before acknowledging it") from None
        if first.method != _ACKNOWLEDGED:
            self._take(first)
        self._task = asyncio.get_running_loop().create_task(self._read(messages))

    async def _read(self, messages: AsyncGenerator[Message, None]) -> None:
        try:
            async for message in messages:
                self._take(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._error = exc
        finally:
            self._queue.put_nowait(_END)

    def _take(self, message: Message) -> None:
        """A message on the listen stream."""
        method = message.method
        if not isinstance(method, str) or method == _ACKNOWLEDGED:
            return
        try:
            params = msgspec.json.decode(message.params) if message.params else None
        except msgspec.DecodeError:
            params = None
        self._keep(method, params)

    # -- handshake: resources/subscribe and the GET stream ---------------------------------

    async def _subscribe_handshake(self) -> None:
        host = self._host
        for uri in self.resources:
            await _request(host, "resources/subscribe", {"uri": uri})
            self._subscribed += (uri,)
        await host.open_unsolicited()


async def _request(host: SubscriptionHost, method: str, params: dict[str, Any]) -> None:
    """A request whose result says nothing more than "done": its stream, read to the end."""
    async for _ in host.stream(method, params):
        pass
