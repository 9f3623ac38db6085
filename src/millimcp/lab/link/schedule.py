"""When each chunk of one direction arrives: a token bucket for the bandwidth, then the
one-way delay, jitter and loss, never out of order. Pure arithmetic on the times it is
given (no clock, no I/O), so the model is tested without waiting."""

from __future__ import annotations

import math
import random

from millimcp.lab.link.spec import LinkConfig

__all__ = ["Schedule", "TokenBucket"]


class TokenBucket:
    """Bytes at ``rate`` per second with a bucket of ``burst`` bytes.

    :meth:`reserve` may take more than the bucket holds (the bucket goes into debt): the
    chunk leaves when the debt would be repaid, which is when a link of that rate finishes
    sending it. A rate of 0 is unlimited.
    """

    __slots__ = ("_at", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._tokens = float(burst)
        self._at = -math.inf

    def reserve(self, size: int, now: float) -> float:
        """Take ``size`` bytes at ``now``; returns the time they have all been sent."""
        if self.rate <= 0:
            return now
        if self._at == -math.inf:
            self._tokens = self.burst
        else:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= size
        return now if self._tokens >= 0 else now + (-self._tokens) / self.rate


class Schedule:
    """One direction's arrival times (same clock as the times given)."""

    __slots__ = ("_bucket", "_last", "_random", "config", "losses")

    def __init__(self, config: LinkConfig, rng: random.Random | None = None) -> None:
        self.config = config
        self._bucket = TokenBucket(config.bandwidth_bps / 8.0, config.burst)
        self._random = rng or random.Random(config.seed)
        self._last = -math.inf
        self.losses = 0
        """Chunks held back by an emulated retransmission so far."""

    def arrival(self, size: int, now: float) -> float:
        """The time a chunk of ``size`` bytes read at ``now`` reaches the other side."""
        config = self.config
        at = self._bucket.reserve(size, now) + config.one_way_s
        if config.jitter_s:
            at = max(now, at + self._random.uniform(-config.jitter_s, config.jitter_s))
        if config.loss and size:
            segments = max(1, math.ceil(size / config.mss))
            if self._random.random() < 1.0 - (1.0 - config.loss) ** segments:
                self.losses += 1
                at += max(config.rtt_s, 0.001)  # fast retransmit: about one RTT later
        at = max(at, self._last)  # a byte stream: nothing overtakes what was sent before
        self._last = at
        return at
