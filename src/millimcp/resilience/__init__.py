"""Resilience: value objects and mechanisms that keep latency bounded under load and faults.

- :mod:`~millimcp.resilience.policy`: the client's settings, :class:`Limits`,
  :class:`Timeout`, :class:`Retry`.
- :mod:`~millimcp.resilience.gate`: :class:`CallGate`, the client's concurrency cap with a
  bounded wait queue.
- :mod:`~millimcp.resilience.deadline`: :class:`Deadline` and :func:`run_with_deadline`.
- :mod:`~millimcp.resilience.retry`: what is safe to retry (:func:`is_retryable`) and the
  retry loop with full jitter and ``Retry-After`` (:func:`call_with_retries`).
- :mod:`~millimcp.resilience.limiter`: the server's in-flight limiter with a bounded wait
  queue (backpressure) and the Little's-law helper that sizes it.

Knows asyncio, not HTTP or MCP.
"""

from millimcp.resilience.deadline import Deadline, run_with_deadline
from millimcp.resilience.gate import CallGate
from millimcp.resilience.limiter import ConcurrencyLimit, InFlightLimiter, limit_for
from millimcp.resilience.policy import Limits, Retry, Timeout
from millimcp.resilience.retry import call_with_retries, is_retryable

__all__ = [
    "CallGate",
    "ConcurrencyLimit",
    "Deadline",
    "InFlightLimiter",
    "Limits",
    "Retry",
    "Timeout",
    "call_with_retries",
    "is_retryable",
    "limit_for",
    "run_with_deadline",
]
