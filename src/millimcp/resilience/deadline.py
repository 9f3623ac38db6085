"""Per-call deadlines: a :class:`Deadline` is set once at the top of a call and every stage
below it (queue, retries, backoff, the request itself) spends from it.

:func:`run_with_deadline` runs a coroutine under the deadline. On expiry the coroutine is
cancelled (which is how a link cancels the request on the server: the HTTP link closes the
response stream, the stdio link sends ``notifications/cancelled``) and the caller gets
:class:`~millimcp.errors.CallTimeout`. A deadline that progress extends
(:meth:`Deadline.extend_on_progress`) moves the running expiry with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from millimcp.errors import CallTimeout
from millimcp.resilience.policy import Timeout

__all__ = ["Deadline", "run_with_deadline"]

T = TypeVar("T")


class Deadline:
    """When one call must be done, on a monotonic clock.

    ``total`` seconds from creation (``None``: no deadline); with ``reset_on_progress``,
    :meth:`extend_on_progress` restarts that window from now, but never past ``hard_cap``
    seconds from the start. ``clock`` is injectable for tests (default
    :func:`time.monotonic`). One deadline serves one call (and its retries), on one event loop.
    """

    __slots__ = (
        "_cap_at",
        "_clock",
        "_expires_at",
        "_scope",
        "hard_cap",
        "reset_on_progress",
        "start",
        "total",
    )

    def __init__(
        self,
        total: float | None,
        *,
        reset_on_progress: bool = False,
        hard_cap: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self.start = clock()
        self.total = total
        self.reset_on_progress = reset_on_progress
        self.hard_cap = hard_cap
        self._cap_at = None if hard_cap is None else self.start + hard_cap
        self._expires_at = _earliest(None if total is None else self.start + total, self._cap_at)
        self._scope: asyncio.Timeout | None = None

    @classmethod
    def from_timeout(
        cls, timeout: Timeout, *, clock: Callable[[], float] = time.monotonic
    ) -> Deadline:
        """A deadline starting now with ``timeout``'s ``total``, ``reset_on_progress`` and
        ``hard_cap``."""
        return cls(
            timeout.total,
            reset_on_progress=timeout.reset_on_progress,
            hard_cap=timeout.hard_cap,
            clock=clock,
        )

    def __repr__(self) -> str:
        remaining = self.remaining()
        left = "unbounded" if math.isinf(remaining) else f"{remaining:.3f}s left"
        return f"<Deadline total={self.total} hard_cap={self.hard_cap} {left}>"

    @property
    def expires_at(self) -> float | None:
        """The expiry on :attr:`clock`'s scale; ``None`` when there is no deadline."""
        return self._expires_at

    @property
    def bounded(self) -> bool:
        """Whether there is a deadline at all."""
        return self._expires_at is not None

    def remaining(self) -> float:
        """Seconds left (negative once past; ``math.inf`` when there is no deadline)."""
        if self._expires_at is None:
            return math.inf
        return self._expires_at - self._clock()

    def elapsed(self) -> float:
        """Seconds since the deadline was set."""
        return self._clock() - self.start

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0

    def extend_on_progress(self) -> bool:
        """Progress arrived: with ``reset_on_progress``, restart the ``total`` window from now,
        capped at ``hard_cap`` from the start. Never shortens the deadline, never revives an
        expired one. Returns whether the expiry moved. A no-op without ``reset_on_progress``,
        so the caller can call it on every progress notification."""
        if not self.reset_on_progress or self.total is None or self._expires_at is None:
            return False
        now = self._clock()
        if now >= self._expires_at:
            return False
        moved = _earliest(now + self.total, self._cap_at)
        if moved is None or moved <= self._expires_at:
            return False
        self._expires_at = moved
        scope = self._scope
        if scope is not None and not scope.expired():
            with contextlib.suppress(RuntimeError):  # exiting: the call is over either way
                scope.reschedule(asyncio.get_running_loop().time() + (moved - now))
        return True

    def describe(self) -> str:
        """The limit in words, for error messages: ``"timeout 2 s"``, plus the progress rule."""
        if self.total is None:
            words = "no timeout"
        else:
            words = f"timeout {self.total:g} s"
            if self.reset_on_progress:
                words += " (reset on progress)"
        if self.hard_cap is not None:
            words += f", hard cap {self.hard_cap:g} s"
        return words


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


async def run_with_deadline(
    fn: Callable[[], Awaitable[T]], deadline: Deadline, *, what: str = "call"
) -> T:
    """Await ``fn()`` until ``deadline``; on expiry cancel it and raise :class:`CallTimeout`.

    The coroutine runs in the caller's task under an :func:`asyncio.timeout` scope (no extra
    task per call), and :meth:`Deadline.extend_on_progress` reschedules that scope, so an
    extended deadline is honoured. On expiry the coroutine is cancelled and awaited to its end
    (its ``finally`` blocks run, the link cancels the request on the server); if it turns the
    cancellation into another error, that error becomes the ``CallTimeout``'s cause. An
    already expired deadline raises at once without calling ``fn``. A cancellation from
    outside (the caller's own task cancelled) propagates as ``CancelledError``. ``what``
    names the call in the message (``"tools/call 'get_order'"``).
    """
    remaining = deadline.remaining()
    if math.isinf(remaining):
        return await fn()
    if remaining <= 0:
        raise CallTimeout(
            f"{what} timed out: its deadline had passed before it started ({deadline.describe()})"
        )
    scope = asyncio.timeout(remaining)
    previous, deadline._scope = deadline._scope, scope
    try:
        async with scope:
            return await fn()
    except Exception as error:
        if scope.expired():
            raise CallTimeout(
                f"{what} timed out after {deadline.elapsed():.3g} s ({deadline.describe()})"
            ) from (None if isinstance(error, TimeoutError) else error)
        raise
    finally:
        deadline._scope = previous
