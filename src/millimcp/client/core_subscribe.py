"""Subscriptions: the notifications a server starts (list changes, resource updates).

Modern era: one ``subscriptions/listen`` request whose response stream stays open and
carries the notifications the filter asked for (the server first sends
``notifications/subscriptions/acknowledged``); closing the subscription closes the stream
(HTTP) or cancels the request (stdio). Handshake era: ``resources/subscribe`` for each URI
and the session's GET stream, which carries every list change; closing sends
``resources/unsubscribe``.

Either way a :class:`Subscription` is an async iterator of
:class:`~millimcp.client.results.Notification`; ``async with`` waits until it is live (so a
change made inside the block is not missed) and closes it at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import msgspec

from millimcp.client.core import EMPTY
from millimcp.client.results import Notification
from millimcp.errors import ClientError
from millimcp.protocol import Message, encode_request

if TYPE_CHECKING:
    from millimcp.client.core import Core

__all__ = ["Subscription"]

log: Final = logging.getLogger("millimcp.client")

_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
_END: Final[Any] = object()
_MAX_QUEUED: Final = 1024
_FLAGS: Final = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}


class Subscription:
    """One subscription; iterate it for notifications, close it when done."""

    def __init__(
        self,
        core: Core,
        *,
        tools_list_changed: bool = False,
        prompts_list_changed: bool = False,
        resources_list_changed: bool = False,
        resources: Sequence[str] = (),
    ) -> None:
        self._core = core
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
        self._request_id: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._acknowledged = asyncio.Event()
        self._error: BaseException | None = None
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
        """Open the subscription and wait until the server has it (at most the client's
        connect timeout for the handshake era's GET stream)."""
        if self._started:
            return
        self._started = True
        core = self._core
        core.subscriptions.add(self)
        if core.era == "modern":
            await self._listen()
        else:
            await self._subscribe_legacy()

    async def aclose(self) -> None:
        """End the subscription (idempotent)."""
        if self._closed:
            return
        self._closed = True
        core = self._core
        core.subscriptions.discard(self)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        elif self._started and self.resources and core.era == "handshake":
            for uri in self.resources:
                with contextlib.suppress(Exception):
                    await core.call("resources/unsubscribe", {"uri": uri}, EMPTY)
        self._queue.put_nowait(_END)

    # -- what the core hands over ---------------------------------------------------------

    def offer(self, method: str, params: Any, subscription_id: Any) -> None:
        """A notification the server started: keep it if this subscription asked for it."""
        if self._closed:
            return
        mine = self._request_id
        if subscription_id is not None and mine is not None and subscription_id != mine:
            return  # another listen stream's
        if method == _ACKNOWLEDGED:
            self._acknowledged.set()
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
        core = self._core
        self._request_id = request_id = core.next_id()
        params = {"notifications": self._filter, "_meta": core.meta_for_call(None)}
        body = encode_request(request_id, "subscriptions/listen", params)
        headers = core.headers_for("subscriptions/listen", None)
        self._task = asyncio.get_running_loop().create_task(
            self._run_listen(request_id, body, headers)
        )
        waiter = asyncio.ensure_future(self._acknowledged.wait())
        try:
            done, _ = await asyncio.wait(
                (waiter, self._task),
                timeout=core.timeout.total,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            waiter.cancel()
        if waiter not in done:
            error = self._error or ClientError("the server did not acknowledge the subscription")
            await self.aclose()
            raise error

    async def _run_listen(self, request_id: int, body: bytes, headers: Any) -> None:
        core = self._core
        try:
            reply = await core.link.request(
                request_id, body, headers=headers, on_message=self._on_message
            )
            if reply.message.error:
                self._error = core.error_of(reply)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._error = exc
        finally:
            self._queue.put_nowait(_END)

    async def _on_message(self, message: Message) -> None:
        if message.id is not msgspec.UNSET:
            await self._core.on_message(message)  # a request: not expected, answered anyway
            return
        method = message.method
        assert isinstance(method, str)
        self._core.notify(method, message.params)

    # -- handshake: resources/subscribe and the GET stream ------------------------------------

    async def _subscribe_legacy(self) -> None:
        core = self._core
        for uri in self.resources:
            await core.call("resources/subscribe", {"uri": uri}, EMPTY)
        core.start_pump()
        ready = getattr(core.link, "stream_ready", None)
        if ready is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(core.timeout.connect or 5.0):
                    await ready.wait()
