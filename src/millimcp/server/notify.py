"""Change notifications: to ``subscriptions/listen`` streams and to handshake-era sessions.

A modern-era client holds a ``subscriptions/listen`` request open; each change it asked for
is queued on its :class:`Listener` and sent on that request's stream. A listener whose queue
is full (a consumer this far behind) is closed rather than allowed to grow without bound. A
handshake-era session (the ones that sent ``initialize``) gets the same notifications posted
on its standalone stream; a session is dropped from the fan-out when it is collected. Task
status notifications (``notifications/tasks``, the tasks extension) go to the listeners that
named the task in ``taskIds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from typing import Any, Final

import msgspec

from millimcp.protocol import encode_notification
from millimcp.protocol.types import (
    META_SUBSCRIPTION_ID,
    ResourceUpdatedParams,
    SubscriptionFilter,
    SubscriptionsAcknowledgedParams,
    TaskStatusParams,
)
from millimcp.session import Context, Session

__all__ = ["LIST_CHANGED", "Listener", "Notifier"]

LIST_CHANGED: Final = {  # registry kind -> (notification, SubscriptionFilter flag)
    "tools": ("notifications/tools/list_changed", "tools_list_changed"),
    "prompts": ("notifications/prompts/list_changed", "prompts_list_changed"),
    "resources": ("notifications/resources/list_changed", "resources_list_changed"),
    "templates": ("notifications/resources/list_changed", "resources_list_changed"),
}
_UPDATED: Final = "notifications/resources/updated"
_TASK_STATUS: Final = "notifications/tasks"
_CLOSED: Final = object()


class Listener:
    """One ``subscriptions/listen`` stream: its agreed filter and a bounded queue of
    ``(method, uri, task status or None)`` to send."""

    __slots__ = ("filter", "queue", "resources", "tasks")

    def __init__(self, agreed: SubscriptionFilter, size: int) -> None:
        self.filter = agreed
        self.resources = frozenset(agreed.resource_subscriptions or ())
        self.tasks = frozenset(agreed.task_ids or ())
        self.queue: asyncio.Queue[Any] = asyncio.Queue(size)


class Notifier:
    """The fan-out of one server's change notifications."""

    __slots__ = ("_listeners", "_sessions", "queue_size")

    def __init__(self, queue_size: int) -> None:
        self.queue_size = queue_size
        """Notifications buffered per listener before it is closed."""
        self._listeners: set[Listener] = set()
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()

    def __repr__(self) -> str:
        return f"<Notifier listeners={len(self._listeners)} sessions={len(self._sessions)}>"

    def __len__(self) -> int:
        """The open ``subscriptions/listen`` streams."""
        return len(self._listeners)

    def add_session(self, session: Session) -> None:
        """Include a handshake-era session in the fan-out (until it is collected)."""
        self._sessions.add(session)

    def list_changed(self, kind: str) -> None:
        """Announce that the list of ``kind`` (a key of :data:`LIST_CHANGED`) changed."""
        method, flag = LIST_CHANGED[kind]
        for listener in tuple(self._listeners):
            if getattr(listener.filter, flag):
                self._deliver(listener, method, None)
        if self._sessions:
            message = encode_notification(method)
            for session in tuple(self._sessions):
                session.post(message)

    def resource_updated(self, uri: str) -> None:
        """Tell every listener and session subscribed to ``uri`` that it changed."""
        for listener in tuple(self._listeners):
            if uri in listener.resources:
                self._deliver(listener, _UPDATED, uri)
        message: bytes | None = None
        for session in tuple(self._sessions):
            if uri in session.subscriptions:
                if message is None:
                    message = encode_notification(_UPDATED, ResourceUpdatedParams(uri=uri))
                session.post(message)

    def task_changed(self, status: TaskStatusParams) -> None:
        """Send a task's new detailed state to every listener that named the task."""
        for listener in tuple(self._listeners):
            if status.task_id in listener.tasks:
                self._deliver(listener, _TASK_STATUS, None, status)

    async def listen(self, wanted: SubscriptionFilter, ctx: Context) -> dict[str, Any]:
        """Serve one ``subscriptions/listen`` request until :meth:`close` or overflow.

        Acknowledges what was agreed (what was asked for, with ``False`` flags left out),
        then sends each queued notification on the request's stream, every one tagged with
        the subscription's ``_meta``, which it returns for the final result.
        """
        agreed = SubscriptionFilter(
            tools_list_changed=wanted.tools_list_changed or None,
            prompts_list_changed=wanted.prompts_list_changed or None,
            resources_list_changed=wanted.resources_list_changed or None,
            resource_subscriptions=wanted.resource_subscriptions,
            task_ids=wanted.task_ids,
        )
        subscription = {META_SUBSCRIPTION_ID: ctx.request_id}
        listener = Listener(agreed, self.queue_size)
        self._listeners.add(listener)
        try:
            await ctx.send_notification(
                "notifications/subscriptions/acknowledged",
                SubscriptionsAcknowledgedParams(notifications=agreed, meta=subscription),
            )
            while True:
                item = await listener.queue.get()
                if item is _CLOSED:
                    break
                method, uri, task = item
                params: Any
                if task is not None:
                    params = msgspec.structs.replace(task, meta=subscription)
                elif uri is not None:
                    params = ResourceUpdatedParams(uri=uri, meta=subscription)
                else:
                    params = {"_meta": subscription}
                await ctx.send_notification(method, params)
        finally:
            self._listeners.discard(listener)
        return subscription

    def close(self) -> None:
        """End every listener's stream gracefully (each gets its final result)."""
        for listener in tuple(self._listeners):
            with contextlib.suppress(asyncio.QueueFull):
                listener.queue.put_nowait(_CLOSED)
        self._listeners.clear()

    def _deliver(
        self,
        listener: Listener,
        method: str,
        uri: str | None,
        task: TaskStatusParams | None = None,
    ) -> None:
        try:
            listener.queue.put_nowait((method, uri, task))
        except asyncio.QueueFull:
            self._listeners.discard(listener)
            listener.queue.get_nowait()
            listener.queue.put_nowait(_CLOSED)
