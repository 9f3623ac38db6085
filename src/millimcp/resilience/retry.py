"""Which failed calls are tried again, and the retry loop (SEEDS S4.3, S4.4).

The rule: retry only what is *safe* to send again, and only what a later try can fix.

Safe means the server certainly did not run the call, or running it twice does no harm:

- :class:`~millimcp.errors.NotSent`: the request never reached the server (connect refused,
  DNS, pool closed). Always retried.
- :class:`~millimcp.errors.Overloaded` (-32050) and :class:`~millimcp.errors.TooManySessions`
  (-32002), which a server answers with HTTP 503 *before* running anything. Always retried,
  after at least the server's ``Retry-After``.
- Anything else that a later try may fix is retried only when the call is ``idempotent``
  (the tool is annotated ``readOnlyHint`` or ``idempotentHint``, or the method is a read such
  as ``tools/list`` or ``resources/read``; the caller decides): the request may have reached
  the server and run, so a second try would run it twice. These are
  :class:`~millimcp.errors.ConnectionLost` (the connection broke after the request may have
  left), HTTP 408, 429, 502, 503 and 504 (from the server or a proxy in front of it), and
  JSON-RPC -32603 (internal error, often transient).

Never retried, because the same request would fail the same way: -32700 (parse error),
-32600 (invalid request), -32601 (method not found), -32602 (invalid params), -32020 (header
mismatch), -32021 (missing client capability), any other HTTP 4xx, and any other error
(a tool's ``isError`` result is a result, not a failure). -32022 (unsupported protocol
version) and -32001 (session not found) are not retried here either: the client core
renegotiates the version or re-initializes the session once. Nor are
:class:`~millimcp.errors.CallTimeout` (the deadline is spent) and
:class:`~millimcp.errors.QueueFull` (our own cap).

The HTTP status and ``Retry-After`` of a failure are read from the exception:
``RequestRejected.status``; for a JSON-RPC error, the ``http_status`` the client core set on
the :class:`~millimcp.errors.ProtocolError` it raised (a class default does not count: over
stdio there is no status) and an optional ``retry_after_s`` attribute (set on
:class:`~millimcp.errors.Overloaded`; any exception may carry one).
"""

from __future__ import annotations

import asyncio
import random as _random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from millimcp.errors import (
    ConnectionLost,
    InternalError,
    NotSent,
    Overloaded,
    ProtocolError,
    RequestRejected,
    SessionNotFound,
    TooManySessions,
)
from millimcp.resilience.deadline import Deadline
from millimcp.resilience.policy import Retry

__all__ = [
    "NEVER_RETRIED_CODES",
    "RETRYABLE_STATUSES",
    "call_with_retries",
    "is_retryable",
    "retry_after_of",
    "retry_failed",
    "status_of",
]

T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({408, 429, 502, 503, 504})
"""HTTP statuses a later try may fix (timeout, rate limit, bad gateway, unavailable,
gateway timeout). Retried only for idempotent calls, unless the error says the call never
ran (Overloaded, TooManySessions)."""

NEVER_RETRIED_CODES = frozenset(
    {-32700, -32600, -32601, -32602, -32020, -32021, -32022, SessionNotFound.code}
)
"""JSON-RPC codes the same request cannot fix. -32022 (unsupported version) and -32001
(session not found) are the client core's: it renegotiates or re-initializes once, then
sends a new request."""

_NEVER_RAN_CODES = frozenset({Overloaded.code, TooManySessions.code})

OnRetry = Callable[[int, BaseException, float], None]
"""Called before each retry with the retry's number (1-based), the error that caused it and
the seconds it will wait first (for stats and logs)."""


def status_of(error: BaseException) -> int | None:
    """The HTTP status that came with ``error``, when one did: ``RequestRejected.status``, or
    the ``http_status`` set on a :class:`ProtocolError` instance (not its class default)."""
    if isinstance(error, RequestRejected):
        return error.status
    if isinstance(error, ProtocolError):
        status = vars(error).get("http_status")
        return status if isinstance(status, int) else None
    return None


def retry_after_of(error: BaseException) -> float | None:
    """The server's ``Retry-After`` in seconds carried by ``error`` (attribute
    ``retry_after_s``), or None."""
    value = getattr(error, "retry_after_s", None)
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def is_retryable(error: BaseException, *, status: int | None, idempotent: bool) -> bool:
    """Whether a later try of the call that failed with ``error`` is both safe and useful.

    ``status`` is the HTTP status the failure came with (None over stdio, or before any
    response; a :class:`RequestRejected` carries its own); ``idempotent`` says whether
    running the call twice is harmless. See the module docstring for the rules and why.
    """
    if isinstance(error, NotSent):
        return True  # never reached the server
    if isinstance(error, ProtocolError):
        if error.code in _NEVER_RAN_CODES:
            return True  # refused before it ran (503 + Retry-After)
        if error.code in NEVER_RETRIED_CODES:
            return False
        if error.code == InternalError.code:
            return idempotent
        return idempotent and status in RETRYABLE_STATUSES
    if isinstance(error, ConnectionLost):
        return idempotent  # it may have run
    if isinstance(error, RequestRejected):
        return idempotent and error.status in RETRYABLE_STATUSES  # its own status is the truth
    return False


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: Retry | None,
    *,
    idempotent: bool,
    deadline: Deadline | None,
    on_retry: OnRetry | None = None,
    uniform: Callable[[float, float], float] = _random.uniform,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """Await ``attempt()``; when it raises a retryable error (:func:`is_retryable`), wait and
    try again, at most ``policy.attempts`` more times. ``policy=None`` means one try.

    The wait before retry ``n`` (0-based) is ``uniform(0, policy.backoff_bound(n))``, raised to
    the server's ``Retry-After`` when the error carries one. The loop gives up and re-raises
    the last error (with a note saying why) rather than wait beyond
    ``policy.max_retry_after_s``, or when the wait would not end before ``deadline`` (then no
    time would be left for the retry itself). The error is re-raised unchanged when it is not
    retryable or the retries are spent. ``uniform`` and ``sleep`` are injectable for tests.
    Cancellation is never retried.
    """
    try:
        return await attempt()
    except Exception as exc:
        error = exc  # retried outside the handler: a later failure is not "during handling"
    return await retry_failed(
        attempt,
        error,
        policy,
        idempotent=idempotent,
        deadline=deadline,
        on_retry=on_retry,
        uniform=uniform,
        sleep=sleep,
    )


async def retry_failed(
    attempt: Callable[[], Awaitable[T]],
    error: Exception,
    policy: Retry | None,
    *,
    idempotent: bool,
    deadline: Deadline | None,
    on_retry: OnRetry | None = None,
    uniform: Callable[[float, float], float] = _random.uniform,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """:func:`call_with_retries` after its first try failed with ``error``: the hot path
    awaits the first try itself (no coroutine and no closure per call) and hands a failure
    here. Re-raises ``error`` when it is not retried."""
    retries = 0
    while True:
        if policy is None or not is_retryable(
            error, status=status_of(error), idempotent=idempotent
        ):
            raise error
        if retries >= policy.attempts:
            if policy.attempts:
                error.add_note(f"gave up after {retries} retries (Retry.attempts)")
            raise error
        delay = uniform(0.0, policy.backoff_bound(retries))
        retry_after = retry_after_of(error)
        if retry_after is not None:
            if retry_after > policy.max_retry_after_s:
                error.add_note(
                    f"not retried: the server asked to wait {retry_after:g} s, more than "
                    f"Retry.max_retry_after_s={policy.max_retry_after_s:g}"
                )
                raise error
            delay = max(delay, retry_after)
        if deadline is not None and deadline.remaining() <= delay:
            error.add_note(
                f"not retried: waiting {delay:.3g} s would reach the call's deadline "
                f"({deadline.describe()})"
            )
            raise error
        retries += 1
        if on_retry is not None:
            on_retry(retries, error, delay)
        await sleep(delay)
        try:
            return await attempt()
        except Exception as exc:
            error = exc
