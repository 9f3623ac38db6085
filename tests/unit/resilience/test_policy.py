"""millimcp.resilience.policy: the Limits, Timeout and Retry value objects."""

from __future__ import annotations

import dataclasses

import pytest

from millimcp.errors import ConfigurationError
from millimcp.resilience import Limits, Retry, Timeout


def test_limits_defaults_and_resolved_pool_sizes() -> None:
    limits = Limits()
    assert (limits.max_in_flight, limits.max_queue) == (64, 256)
    assert (limits.max_connections, limits.max_keepalive) == (None, None)
    assert (limits.connections, limits.keepalive) == (64, 64)
    assert limits.keepalive_expiry_s == 30.0
    smaller = dataclasses.replace(limits, max_in_flight=8)
    assert (smaller.connections, smaller.keepalive) == (8, 8)  # the pool follows the cap
    explicit = Limits(max_in_flight=8, max_connections=4)
    assert (explicit.connections, explicit.keepalive) == (4, 4)
    assert Limits(max_connections=4, max_keepalive=0).keepalive == 0
    assert Limits(max_queue=0).max_queue == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_in_flight": 0},
        {"max_queue": -1},
        {"max_connections": 0},
        {"max_keepalive": -1},
        {"keepalive_expiry_s": 0},
        {"keepalive_expiry_s": float("nan")},
        {"keepalive_expiry_s": float("inf")},
    ],
)
def test_limits_refuses_values_that_cannot_work(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError, match="Limits"):
        Limits(**kwargs)  # type: ignore[arg-type]


def test_value_objects_are_frozen_and_slotted() -> None:
    for value, field in ((Limits(), "max_queue"), (Timeout(), "total"), (Retry(), "attempts")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, 1)
        assert not hasattr(value, "__dict__")


def test_timeout_defaults_validation_and_coercion() -> None:
    timeout = Timeout()
    assert (timeout.total, timeout.connect, timeout.reset_on_progress, timeout.hard_cap) == (
        30.0,
        5.0,
        False,
        None,
    )
    assert Timeout(total=None, connect=None).total is None
    nan = float("nan")
    for bad in ({"total": 0}, {"total": -1}, {"connect": 0}, {"hard_cap": 0}, {"total": nan}):
        with pytest.raises(ConfigurationError, match="Timeout"):
            Timeout(**bad)
    assert Timeout.coerce(2) == Timeout(total=2.0)
    assert Timeout.coerce(0.5).connect == 5.0
    assert Timeout.coerce(None) == Timeout(total=None)
    assert Timeout.coerce(timeout) is timeout
    with pytest.raises(ConfigurationError):
        Timeout.coerce(0)
    with pytest.raises(ConfigurationError, match="not str"):
        Timeout.coerce("2")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not bool"):
        Timeout.coerce(True)


def test_retry_defaults_validation_and_backoff_bounds() -> None:
    retry = Retry()
    assert (retry.attempts, retry.base_s, retry.cap_s, retry.max_retry_after_s) == (
        2,
        0.1,
        5.0,
        30.0,
    )
    assert [retry.backoff_bound(n) for n in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert retry.backoff_bound(10_000) == 5.0  # no overflow
    assert Retry(base_s=0).backoff_bound(3) == 0.0
    assert Retry(attempts=0).attempts == 0
    inf = float("inf")
    for bad in ({"attempts": -1}, {"base_s": -0.1}, {"cap_s": inf}, {"max_retry_after_s": -1}):
        with pytest.raises(ConfigurationError, match="Retry"):
            Retry(**bad)
