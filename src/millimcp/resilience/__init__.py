"""Resilience: value objects and mechanisms that keep a server's latency under load.

Today: the in-flight limiter with a bounded wait queue (backpressure) and the Little's-law
helper that sizes it. Knows asyncio, not HTTP or MCP.
"""

from millimcp.resilience.limiter import ConcurrencyLimit, InFlightLimiter, limit_for

__all__ = ["ConcurrencyLimit", "InFlightLimiter", "limit_for"]
