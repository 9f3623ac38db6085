"""Per-call deadlines: a :class:`Deadline` is set once at the top of a call and every stage
below it (queue, retries, backoff, the request itself) spends from it.

:func:`run_with_deadline` runs a coroutine under the deadline. On expiry the coroutine is
cancelled (which is how a link cancels the request on the server: the HTTP link closes the
response stream, the stdio link sends ``notifications/cancelled``) and the caller gets
:class:`~millimcp.errors.CallTimeout`. A deadline that progress extends
(:meth:`Deadline.extend_on_progress`) moves the running expiry with it.

The running calls of one event loop share one timer (:class:`_Timekeeper`): a call under a
deadline is a :class:`Watch` in a set, not a timer handle and a timeout scope of its own.
The timer is armed for the earliest expiry and, when it fires, cancels the tasks whose
deadline passed and re-arms for the next; calls that end in time only join and leave the
set, so a stream of calls with the same timeout costs one timer event per timeout period.
:meth:`Deadline.watch` is the building block (the client's call pipeline uses it inline);
:func:`run_with_deadline` wraps it around one coroutine.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from millimcp.errors import CallTimeout
from millimcp.resilience.policy import Timeout

__all__ = ["Deadline", "Watch", "run_with_deadline"]

_SLACK_S: Final = 0.001
"""The timer is armed this much after the earliest expiry: loops that keep time in
milliseconds (uvloop) round a timer to the nearest one, and a timer that fired a hair early
would find nothing expired and re-arm at once."""

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
        "_watch",
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
        self.start = start = clock()
        self.total = total
        self.reset_on_progress = reset_on_progress
        self.hard_cap = hard_cap
        self._watch: Watch | None = None
        if hard_cap is None:  # the common case, without a call to _earliest
            self._cap_at = None
            self._expires_at = None if total is None else start + total
        else:
            self._cap_at = start + hard_cap
            self._expires_at = _earliest(None if total is None else start + total, self._cap_at)

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
        watch = self._watch
        if watch is not None and not watch.fired:  # the running call's expiry moves too
            watch.when = watch.keeper.loop.time() + (moved - now)
        return True

    def watch(self, what: str, name: str | None = None) -> Watch | None:
        """Start enforcing the deadline on the running task: on expiry the task is cancelled
        (see :meth:`Watch.timed_out`). None when there is no deadline. A deadline that has
        passed already raises :class:`CallTimeout` at once. ``what`` (and ``name``, quoted
        after it) names the call in the messages: ``"tools/call 'get_order'"``.

        The caller must :meth:`Watch.close` the watch when the call ends, however it ends."""
        if self._expires_at is None:
            return None
        remaining = self._expires_at - self._clock()
        if remaining <= 0:
            raise CallTimeout(
                f"{_named(what, name)} timed out: its deadline had passed before it started "
                f"({self.describe()})"
            )
        loop = asyncio.get_running_loop()
        keeper = _keeper
        if keeper is None or keeper.loop is not loop:
            keeper = _keeper_of(loop)
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("Deadline.watch() needs a running task")
        watch = Watch(self, keeper, task, loop.time() + remaining, what, name)
        keeper.watches.add(watch)  # keeper.add(), inline
        if watch.when < keeper.armed_at:
            keeper.arm(watch.when)
        return watch

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


def _named(what: str, name: str | None) -> str:
    return what if name is None else f"{what} {name!r}"


class Watch:
    """One call running under a :class:`Deadline` (made by :meth:`Deadline.watch`).

    When the deadline passes, the loop's timer sets :attr:`fired` and cancels :attr:`task`.
    The code that awaited the call turns what came out of it into the error to raise with
    :meth:`timed_out`, and :meth:`close` ends the watch either way (as ``asyncio.timeout``
    does: a cancellation from someone else stays a cancellation).
    """

    __slots__ = (
        "_cancelling",
        "_closed",
        "_deadline",
        "_name",
        "_previous",
        "_what",
        "fired",
        "keeper",
        "task",
        "when",
    )

    def __init__(
        self,
        deadline: Deadline,
        keeper: _Timekeeper,
        task: asyncio.Task[object],
        when: float,
        what: str,
        name: str | None,
    ) -> None:
        self._deadline = deadline
        self.keeper = keeper
        self.task = task
        self.when = when
        """The expiry on the loop's clock."""
        self.fired = False
        """The deadline passed and the task was cancelled for it."""
        self._what = what
        self._name = name
        self._cancelling = task.cancelling()
        self._closed = False
        self._previous, deadline._watch = deadline._watch, self

    def __repr__(self) -> str:
        return f"<Watch {_named(self._what, self._name)} fired={self.fired}>"

    def timed_out(self, error: BaseException) -> CallTimeout | None:
        """The :class:`CallTimeout` to raise instead of ``error`` (what the call raised), or
        None when ``error`` is not the deadline's doing (raise it as it is). A cancellation
        counts only when nobody else cancelled the task meanwhile; another error raised
        while the call was being cancelled for the deadline becomes the timeout's cause."""
        if not self.fired or self._closed:
            return None
        self._close()
        if isinstance(error, asyncio.CancelledError):
            if self.task.uncancel() > self._cancelling:
                return None  # cancelled from outside as well: stay cancelled
        else:
            self.task.uncancel()
            if not isinstance(error, Exception):
                return None
        deadline = self._deadline
        timeout = CallTimeout(
            f"{_named(self._what, self._name)} timed out after {deadline.elapsed():.3g} s "
            f"({deadline.describe()})"
        )
        if not isinstance(error, asyncio.CancelledError | TimeoutError):
            timeout.__cause__ = error
        else:
            timeout.__suppress_context__ = True
        return timeout

    def close(self) -> None:
        """End the watch (idempotent). A deadline that fired while the call finished anyway
        takes its cancellation back."""
        if not self._closed:
            self._closed = True  # _close(), inline
            self.keeper.watches.discard(self)
            self._deadline._watch = self._previous
            if self.fired:
                self.task.uncancel()

    def _close(self) -> None:
        self._closed = True
        self.keeper.watches.discard(self)
        self._deadline._watch = self._previous


class _Timekeeper:
    """The one timer of an event loop's watched calls (see the module docstring)."""

    __slots__ = ("__weakref__", "_handle", "armed_at", "loop", "watches")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.watches: set[Watch] = set()
        self._handle: asyncio.TimerHandle | None = None
        self.armed_at = math.inf

    def arm(self, when: float) -> None:
        """Fire at ``when`` (loop time), the earliest expiry (:meth:`Deadline.watch` adds a
        watch to :attr:`watches` and arms the timer when it expires first)."""
        if self._handle is not None:
            self._handle.cancel()
        self.armed_at = when
        self._handle = self.loop.call_at(when + _SLACK_S, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self.armed_at = math.inf
        now = self.loop.time()
        earliest = math.inf
        for watch in tuple(self.watches):
            when = watch.when
            if when <= now:
                self.watches.discard(watch)
                watch.fired = True
                watch.task.cancel()
            elif when < earliest:
                earliest = when
        if earliest < math.inf:
            self.arm(earliest)


_keeper: _Timekeeper | None = None
"""The last loop's timekeeper (the common case: one loop)."""
_keepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Timekeeper] = (
    weakref.WeakKeyDictionary()
)


def _keeper_of(loop: asyncio.AbstractEventLoop) -> _Timekeeper:
    global _keeper
    keeper = _keepers.get(loop)
    if keeper is None:
        keeper = _keepers[loop] = _Timekeeper(loop)
    _keeper = keeper
    return keeper


async def run_with_deadline(
    fn: Callable[[], Awaitable[T]], deadline: Deadline, *, what: str = "call"
) -> T:
    """Await ``fn()`` until ``deadline``; on expiry cancel it and raise :class:`CallTimeout`.

    The coroutine runs in the caller's task (no extra task per call), watched by the loop's
    shared timer (:meth:`Deadline.watch`), and :meth:`Deadline.extend_on_progress` moves its
    expiry, so an extended deadline is honoured. On expiry the coroutine is cancelled and
    awaited to its end (its ``finally`` blocks run, the link cancels the request on the
    server); if it turns the cancellation into another error, that error becomes the
    ``CallTimeout``'s cause. An already expired deadline raises at once without calling
    ``fn``. A cancellation from outside (the caller's own task cancelled) propagates as
    ``CancelledError``. ``what`` names the call in the message (``"tools/call 'get_order'"``).
    """
    watch = deadline.watch(what)
    if watch is None:
        return await fn()
    try:
        return await fn()
    except BaseException as error:
        timeout = watch.timed_out(error)
        if timeout is not None:
            raise timeout from timeout.__cause__
        raise
    finally:
        watch.close()
