"""Requests in flight: what can cancel one, and the calls of one connection or session by id.

A request is cancelled by its peer in one of two ways: the HTTP client goes away (closing the
response stream is cancellation in both eras) or the client sends ``notifications/cancelled``
(a handshake-era session, any stdio connection). Either way the request's task is cancelled
and the request gets no answer; :meth:`~millimcp.session.router.Router.run` tells that
cancellation (``None``, no outcome) from any other, which propagates.

A :class:`Call` is one request being served; an :class:`InFlight` holds the calls of one
session or connection by request id, for ``notifications/cancelled``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any, Final, Protocol

import msgspec

from millimcp.protocol import Message
from millimcp.protocol.types import CancelledParams, RequestId

__all__ = ["TASKS", "Call", "InFlight", "cancelled_id"]

_CANCELLED_PARAMS: Final = msgspec.json.Decoder(CancelledParams)

TASKS: Final[dict[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None] = (
    getattr(asyncio.tasks, "_current_tasks", None) if sys.version_info < (3, 12) else None
)
"""Python 3.11's table of the task each loop runs, or None. There ``asyncio.current_task``
is Python code (a frame per call, on every HTTP request's path), and ``TASKS.get(
get_running_loop())`` is the same answer from two C calls; from 3.12 on ``current_task`` is
C itself, and this is None."""


class Disconnects(Protocol):
    """An exchange whose client may go away (the HTTP transport's)."""

    async def wait_disconnect(self) -> None:
        """Return when the client goes away."""


class Call(msgspec.Struct, eq=False):
    """One request being served, and whether its peer gave up on it.

    A struct: one is made per request and msgspec builds it in C. The last three fields belong
    to the disconnect sweeper (:mod:`millimcp.session.disconnects`), for HTTP requests.
    """

    task: asyncio.Task[Any] | None = None
    """The task serving the request; cancelled when the peer gives up."""
    cancelled: bool = False
    """The client sent ``notifications/cancelled`` for it."""
    disconnected: bool = False
    """The HTTP client went away before the answer."""
    disconnect: Disconnects | None = None
    """The HTTP exchange, whose ``wait_disconnect`` the sweeper watches."""
    age: int = 0
    watcher: asyncio.Future[None] | None = None

    @property
    def abandoned(self) -> bool:
        """The peer gave up on the request: cancelled or disconnected."""
        return self.cancelled or self.disconnected

    def cancel(self) -> None:
        """``notifications/cancelled``: stop the request; it gets no answer."""
        if self.task is not None and not self.task.done():
            self.cancelled = True
            self.task.cancel()


class InFlight:
    """The calls of one session or connection, by request id."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[RequestId, Call] = {}

    def __repr__(self) -> str:
        return f"<InFlight {len(self._calls)}>"

    def __len__(self) -> int:
        return len(self._calls)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._calls

    def __iter__(self) -> Iterator[Call]:
        return iter(tuple(self._calls.values()))

    def add(self, request_id: RequestId, call: Call) -> None:
        self._calls[request_id] = call

    def discard(self, request_id: RequestId, call: Call) -> None:
        """Forget ``call`` (only if it is still the one under ``request_id``)."""
        if self._calls.get(request_id) is call:
            del self._calls[request_id]

    def cancel(self, request_id: RequestId | None) -> None:
        """Cancel the call ``notifications/cancelled`` names; unknown or finished: nothing.

        The call is forgotten at once: it gets no answer, and a task cancelled before it
        started never runs the code that would forget it.
        """
        if request_id is None:
            return
        call = self._calls.pop(request_id, None)
        if call is not None:
            call.cancel()

    def cancel_all(self) -> None:
        for call in tuple(self._calls.values()):
            if call.task is not None:
                call.task.cancel()

    def tasks(self) -> list[asyncio.Task[Any]]:
        return [call.task for call in self._calls.values() if call.task is not None]


def cancelled_id(message: Message) -> RequestId | None:
    """The id a ``notifications/cancelled`` names; None when it names none or is malformed
    (a notification gets no answer, so a bad one just changes nothing)."""
    try:
        return _CANCELLED_PARAMS.decode(message.params or b"{}").request_id
    except msgspec.DecodeError:
        return None
