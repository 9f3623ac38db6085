"""The cache's own counters (also reported to the trace hook as ``cache`` events)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CacheStats"]


@dataclass(slots=True)
class CacheStats:
    hits_l1: int = 0
    hits_l2: int = 0
    misses: int = 0
    coalesced: int = 0
    """Calls that waited for an identical call already running (single-flight)."""
    bypassed: int = 0
    """Private calls without a principal: run, never cached."""
    stores: int = 0
    errors_not_cached: int = 0
    invalidations: int = 0
    remote_invalidations: int = 0
    """Invalidations received from other processes (Redis pub/sub)."""
    fallbacks: int = 0
    """Redis operations skipped or failed: the call went on with L1 only."""
