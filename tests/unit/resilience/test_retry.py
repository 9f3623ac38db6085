"""millimcp.resilience.retry: what is safe to retry, and the retry loop."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from millimcp.errors import (
    CallTimeout,
    ConnectionLost,
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingClientCapability,
    NotSent,
    Overloaded,
    ParseError,
    ProtocolError,
    QueueFull,
    RequestRejected,
    SessionNotFound,
    TooManySessions,
    UnsupportedProtocolVersion,
    error_from_code,
)
from millimcp.resilience import Deadline, Retry, call_with_retries, is_retryable
from millimcp.resilience.retry import retry_after_of, status_of


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A fake ``sleep`` (records the waits and advances a fake clock) and ``uniform``."""

    def __init__(self, clock: FakeClock | None = None, fraction: float = 0.5) -> None:
        self.clock = clock
        self.fraction = fraction
        self.sleeps: list[float] = []
        self.bounds: list[tuple[float, float]] = []

    def uniform(self, low: float, high: float) -> float:
        self.bounds.append((low, high))
        return low + (high - low) * self.fraction

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.clock is not None:
            self.clock.now += seconds


Attempt = Callable[[], Awaitable[str]]


def failing(*errors: BaseException, result: str = "ok") -> tuple[Attempt, list[int]]:
    """An attempt that raises ``errors`` in turn, then returns ``result``; and its call count."""
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(len(calls))
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    return attempt, calls


# --- is_retryable -------------------------------------------------------------------------


def with_status(error: ProtocolError, status: int) -> ProtocolError:
    error.http_status = status  # what the client core sets
    return error


@pytest.mark.parametrize("idempotent", [False, True])
def test_never_sent_and_refused_before_running_are_always_retried(idempotent: bool) -> None:
    assert is_retryable(NotSent("refused"), status=None, idempotent=idempotent)
    overloaded = with_status(Overloaded("busy", retry_after_s=1), 503)
    assert is_retryable(overloaded, status=503, idempotent=idempotent)
    assert is_retryable(error_from_code(-32050, "busy"), status=None, idempotent=idempotent)
    assert is_retryable(TooManySessions("full"), status=503, idempotent=idempotent)


def test_maybe_ran_is_retried_only_when_idempotent() -> None:
    maybe_ran: list[tuple[BaseException, int | None]] = [
        (ConnectionLost("reset"), None),
        (InternalError("boom"), 500),
        (InternalError("boom"), None),  # over stdio
        (error_from_code(-32603, "boom"), 200),
        *((RequestRejected(status, "proxy"), status) for status in (408, 429, 502, 503, 504)),
        (with_status(error_from_code(-32099, "server says busy"), 503), 503),
        (with_status(error_from_code(-31999, "gateway"), 429), 429),
    ]
    for error, status in maybe_ran:
        assert is_retryable(error, status=status, idempotent=True), error
        assert not is_retryable(error, status=status, idempotent=False), error


@pytest.mark.parametrize(
    "error",
    [
        ParseError("x"),
        InvalidRequest("x"),
        MethodNotFound("x"),
        InvalidParams("x"),
        HeaderMismatch("x"),
        MissingClientCapability("x"),
        UnsupportedProtocolVersion("x"),  # the core renegotiates once, not this loop
        SessionNotFound("x"),  # the core re-initializes
        RequestRejected(400, "bad"),
        RequestRejected(403, "origin"),
        RequestRejected(413, "too large"),
        RequestRejected(500, "proxy"),
        CallTimeout("spent"),
        QueueFull("full"),
        ValueError("a bug"),
    ],
)
def test_never_retried_even_when_idempotent_and_503(error: BaseException) -> None:
    for status in (None, 503):
        assert not is_retryable(error, status=status, idempotent=True)


def test_status_and_retry_after_are_read_from_the_error() -> None:
    assert status_of(RequestRejected(502, "x")) == 502
    assert status_of(error_from_code(-32603, "x")) is None  # a class default is not a status
    assert status_of(InternalError("x", http_status=502)) == 502
    assert status_of(ConnectionLost("x")) is None
    assert retry_after_of(Overloaded("x", retry_after_s=3)) == 3.0
    assert retry_after_of(NotSent("x")) is None
    tagged = RequestRejected(429, "slow down")
    tagged.retry_after_s = 2.5
    assert retry_after_of(tagged) == 2.5
    tagged.retry_after_s = -1
    assert retry_after_of(tagged) is None


# --- call_with_retries ---------------------------------------------------------------------


async def test_success_first_try_is_one_call_and_no_wait() -> None:
    attempt, calls = failing()
    fake = Recorder()
    result = await call_with_retries(
        attempt, Retry(), idempotent=False, deadline=None, uniform=fake.uniform, sleep=fake.sleep
    )
    assert (result, len(calls), fake.sleeps) == ("ok", 1, [])


async def test_full_jitter_bounds_double_and_on_retry_sees_each_retry() -> None:
    attempt, calls = failing(NotSent("a"), NotSent("b"))
    fake = Recorder(fraction=0.5)
    seen: list[tuple[int, str, float]] = []
    result = await call_with_retries(
        attempt,
        Retry(attempts=2, base_s=0.1),
        idempotent=False,
        deadline=None,
        on_retry=lambda n, error, delay: seen.append((n, str(error), delay)),
        uniform=fake.uniform,
        sleep=fake.sleep,
    )
    assert result == "ok"
    assert len(calls) == 3
    assert fake.bounds == [(0.0, 0.1), (0.0, 0.2)]
    assert fake.sleeps == pytest.approx([0.05, 0.1])
    assert [(n, text) for n, text, _ in seen] == [(1, "a"), (2, "b")]
    assert [delay for _, _, delay in seen] == pytest.approx([0.05, 0.1])


async def test_gives_up_after_the_attempts_with_a_note() -> None:
    attempt, calls = failing(*(NotSent(str(n)) for n in range(10)))
    fake = Recorder()
    with pytest.raises(NotSent) as raised:
        await call_with_retries(
            attempt, Retry(attempts=3), idempotent=True, deadline=None, sleep=fake.sleep
        )
    assert len(calls) == 4
    assert str(raised.value) == "3"  # the last error
    assert any("after 3 retries" in note for note in raised.value.__notes__)


@pytest.mark.parametrize("policy", [None, Retry(attempts=0)])
async def test_no_policy_or_zero_attempts_means_one_try(policy: Retry | None) -> None:
    attempt, calls = failing(NotSent("x"))
    with pytest.raises(NotSent):
        await call_with_retries(attempt, policy, idempotent=True, deadline=None)
    assert len(calls) == 1


async def test_non_idempotent_call_is_never_sent_twice() -> None:
    for error in (ConnectionLost("reset"), InternalError("boom", http_status=500)):
        attempt, calls = failing(error)
        with pytest.raises(type(error)):
            await call_with_retries(attempt, Retry(), idempotent=False, deadline=None)
        assert len(calls) == 1
    attempt, calls = failing(ConnectionLost("reset"))
    fake = Recorder()
    assert (
        await call_with_retries(attempt, Retry(), idempotent=True, deadline=None, sleep=fake.sleep)
        == "ok"
    )
    assert len(calls) == 2


async def test_invalid_params_and_unsupported_version_are_never_retried() -> None:
    for error in (InvalidParams("bad"), UnsupportedProtocolVersion("old")):
        attempt, calls = failing(error)
        with pytest.raises(type(error)):
            await call_with_retries(attempt, Retry(attempts=5), idempotent=True, deadline=None)
        assert len(calls) == 1


async def test_retry_after_is_a_floor_on_the_jittered_wait() -> None:
    fake = Recorder(fraction=0.5)
    attempt, _ = failing(Overloaded("busy", retry_after_s=1))
    await call_with_retries(
        attempt, Retry(), idempotent=False, deadline=None, uniform=fake.uniform, sleep=fake.sleep
    )
    assert fake.sleeps == [1.0]  # max(0.05 jittered, 1 s asked)
    fake = Recorder(fraction=1.0)
    attempt, _ = failing(Overloaded("busy", retry_after_s=1))
    await call_with_retries(
        attempt,
        Retry(base_s=4.0, cap_s=10.0),
        idempotent=False,
        deadline=None,
        uniform=fake.uniform,
        sleep=fake.sleep,
    )
    assert fake.sleeps == [4.0]  # the jittered wait was longer than the server asked


async def test_retry_after_above_the_maximum_gives_up_at_once() -> None:
    fake = Recorder()
    attempt, calls = failing(Overloaded("busy", retry_after_s=60))
    with pytest.raises(Overloaded) as raised:
        await call_with_retries(
            attempt,
            Retry(max_retry_after_s=30),
            idempotent=True,
            deadline=None,
            sleep=fake.sleep,
        )
    assert len(calls) == 1
    assert fake.sleeps == []
    assert "max_retry_after_s" in raised.value.__notes__[0]


async def test_never_waits_past_the_deadline() -> None:
    clock = FakeClock()
    deadline = Deadline(5.0, clock=clock)
    fake = Recorder(clock=clock)
    clock.now += 4.5  # 0.5 s left; the server asks for 1 s
    attempt, calls = failing(Overloaded("busy", retry_after_s=1))
    with pytest.raises(Overloaded) as raised:
        await call_with_retries(
            attempt, Retry(), idempotent=True, deadline=deadline, sleep=fake.sleep
        )
    assert len(calls) == 1
    assert fake.sleeps == []
    assert "deadline" in raised.value.__notes__[0]
    assert "timeout 5 s" in raised.value.__notes__[0]
    # With time left, the same failure is retried (the deadline is what stopped it above).
    deadline = Deadline(5.0, clock=clock)
    attempt, calls = failing(Overloaded("busy", retry_after_s=1))
    await call_with_retries(attempt, Retry(), idempotent=True, deadline=deadline, sleep=fake.sleep)
    assert len(calls) == 2


async def test_cancellation_is_not_retried() -> None:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await call_with_retries(attempt, Retry(attempts=5), idempotent=True, deadline=None)
    assert calls == [1]


async def test_real_jitter_stays_within_its_bounds_and_really_sleeps() -> None:
    rng = random.Random(7)
    seen: list[float] = []
    attempt, calls = failing(NotSent("a"), NotSent("b"), NotSent("c"))
    result = await call_with_retries(
        attempt,
        Retry(attempts=3, base_s=0.004, cap_s=0.01),
        idempotent=False,
        deadline=Deadline(30.0),
        on_retry=lambda n, error, delay: seen.append(delay),
        uniform=rng.uniform,
    )
    assert result == "ok"
    assert len(calls) == 4
    assert all(0 <= delay <= bound for delay, bound in zip(seen, (0.004, 0.008, 0.01), strict=True))
    assert len(set(seen)) == 3  # jittered, not a fixed schedule
