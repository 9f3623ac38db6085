"""The client's resilience settings as small value objects: :class:`Limits`, :class:`Timeout`,
:class:`Retry`.

Frozen and slotted; each validates itself when built and raises
:class:`~millimcp.errors.ConfigurationError` on a value that cannot work, so a wrong setting
fails at start, not on the first call. The mechanisms that read them live beside them:
:mod:`~millimcp.resilience.gate` (limits), :mod:`~millimcp.resilience.deadline` (timeouts),
:mod:`~millimcp.resilience.retry` (retries).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from millimcp.errors import ConfigurationError

__all__ = ["Limits", "Retry", "Timeout"]


@dataclass(frozen=True, slots=True)
class Limits:
    """How many calls one client runs at once, how many wait, and its connection pool.

    ``max_in_flight`` calls run at once; up to ``max_queue`` more wait for a slot in FIFO
    order; one more fails at once with :class:`~millimcp.errors.QueueFull` (``max_queue=0``:
    fail as soon as the cap is reached). An agent fires 5-10 parallel calls per step; the
    queue bounds the latency a burst can add (SEEDS S4.6).

    ``max_connections`` (default: ``max_in_flight``) caps the HTTP pool; idle connections are
    kept for at most ``keepalive_expiry_s``. ``max_keepalive=0`` keeps none (a new connection
    per call, as a client without keep-alive does); aiohttp keeps no count of idle
    connections, so another ``max_keepalive`` value changes nothing there. The fields keep
    what was given (``None`` for a default, so
    :func:`dataclasses.replace` on ``max_in_flight`` moves the pool with it); read the
    resolved sizes from :attr:`connections` and :attr:`keepalive`.
    """

    max_in_flight: int = 64
    max_queue: int = 256
    max_connections: int | None = None
    max_keepalive: int | None = None
    keepalive_expiry_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ConfigurationError(f"Limits.max_in_flight must be >= 1, not {self.max_in_flight}")
        if self.max_queue < 0:
            raise ConfigurationError(f"Limits.max_queue must be >= 0, not {self.max_queue}")
        if self.max_connections is not None and self.max_connections < 1:
            raise ConfigurationError(
                f"Limits.max_connections must be >= 1, not {self.max_connections}"
            )
        if self.max_keepalive is not None and self.max_keepalive < 0:
            raise ConfigurationError(f"Limits.max_keepalive must be >= 0, not {self.max_keepalive}")
        if not self.keepalive_expiry_s > 0 or math.isinf(self.keepalive_expiry_s):
            raise ConfigurationError(
                f"Limits.keepalive_expiry_s must be a positive number, "
                f"not {self.keepalive_expiry_s}"
            )

    @property
    def connections(self) -> int:
        """The pool's connection cap: ``max_connections``, else ``max_in_flight``."""
        return self.max_in_flight if self.max_connections is None else self.max_connections

    @property
    def keepalive(self) -> int:
        """Idle connections kept: ``max_keepalive``, else :attr:`connections`."""
        return self.connections if self.max_keepalive is None else self.max_keepalive


def _positive_or_none(owner: str, name: str, value: float | None) -> None:
    if value is not None and not value > 0:  # `not >` also refuses NaN
        raise ConfigurationError(f"{owner}.{name} must be > 0 seconds or None, not {value}")


@dataclass(frozen=True, slots=True)
class Timeout:
    """Per-call time limits, in seconds (SEEDS S4.1, S4.2).

    ``total`` is the call's deadline, from its start until its result is back, retries and
    their backoff included (``None``: no deadline). ``connect`` bounds
    opening one connection. With ``reset_on_progress``, each progress notification restarts
    the ``total`` window, but the call never runs longer than ``hard_cap`` seconds from its
    start (``None``: no cap). A ``hard_cap`` shorter than ``total`` is the deadline.
    """

    total: float | None = 30.0
    connect: float | None = 5.0
    reset_on_progress: bool = False
    hard_cap: float | None = None

    def __post_init__(self) -> None:
        _positive_or_none("Timeout", "total", self.total)
        _positive_or_none("Timeout", "connect", self.connect)
        _positive_or_none("Timeout", "hard_cap", self.hard_cap)

    @classmethod
    def coerce(cls, value: Timeout | float | None) -> Timeout:
        """A :class:`Timeout` from what a user passes: itself, seconds as the ``total`` (the
        other fields at their defaults), or ``None`` for no deadline."""
        if isinstance(value, Timeout):
            return value
        if value is None:
            return cls(total=None)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigurationError(
                f"timeout must be a Timeout, seconds or None, not {type(value).__name__}"
            )
        return cls(total=float(value))


@dataclass(frozen=True, slots=True)
class Retry:
    """When and how a failed call is tried again (SEEDS S4.3, S4.4).

    At most ``attempts`` retries after the first try (0: never retry). Before retry ``n``
    (0-based) the client waits ``uniform(0, min(cap_s, base_s * 2**n))`` ("full jitter": a
    crowd of clients that failed together spreads out instead of retrying in lockstep). A
    server's ``Retry-After`` is a floor on that wait; one above ``max_retry_after_s`` means
    giving up rather than waiting. Which failures are retried at all is decided by
    :func:`~millimcp.resilience.retry.is_retryable`.
    """

    attempts: int = 2
    base_s: float = 0.1
    cap_s: float = 5.0
    max_retry_after_s: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 0:
            raise ConfigurationError(f"Retry.attempts must be >= 0, not {self.attempts}")
        if not self.base_s >= 0 or math.isinf(self.base_s):
            raise ConfigurationError(f"Retry.base_s must be >= 0 seconds, not {self.base_s}")
        if not self.cap_s >= 0 or math.isinf(self.cap_s):
            raise ConfigurationError(f"Retry.cap_s must be >= 0 seconds, not {self.cap_s}")
        if not self.max_retry_after_s >= 0:
            raise ConfigurationError(
                f"Retry.max_retry_after_s must be >= 0 seconds, not {self.max_retry_after_s}"
            )

    def backoff_bound(self, n: int) -> float:
        """The upper bound of the wait before retry ``n`` (0-based): ``min(cap_s, base_s *
        2**n)``; the wait itself is drawn uniformly below it."""
        if self.base_s == 0:
            return 0.0
        return min(self.cap_s, self.base_s * 2.0 ** min(n, 64))
