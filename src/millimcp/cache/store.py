"""The two-tier store: L1 in process (TTL + LRU, cachetools), L2 Redis, tags, single-flight.

Invalidation works by generations. Every tag has a generation number, here (L1) and in
Redis (L2); an entry remembers the generations of its tags at the moment its call started
and is valid while they have not moved. ``invalidate(tag)`` bumps the tag here and in Redis
and publishes it, so every process bumps its own copy.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from millimcp.cache.flight import Flights
from millimcp.cache.policy import Cache, CacheConfig
from millimcp.cache.stats import CacheStats
from millimcp.errors import ConfigurationError
from millimcp.observe import TRACE, clock, current_record
from millimcp.protocol.types import CallToolResult

__all__ = ["CacheStore"]

Run = Callable[[], Awaitable[CallToolResult]]


class _Entry:
    __slots__ = ("gens", "result", "tags", "ttl")

    def __init__(
        self, result: CallToolResult, tags: tuple[str, ...], gens: tuple[int, ...], ttl: float
    ) -> None:
        self.result = result
        self.tags = tags
        self.gens = gens
        self.ttl = ttl


def _expires(_key: Any, entry: _Entry, now: float) -> float:
    return now + entry.ttl


def _lru(config: CacheConfig) -> Any:
    try:
        from cachetools import TLRUCache
    except ImportError:
        raise ConfigurationError(
            "tool caching needs cachetools: pip install 'millimcp[cache]'"
        ) from None
    return TLRUCache(maxsize=config.max_entries, ttu=_expires, timer=time.monotonic)


class CacheStore:
    """One server's cache: ``await server.cache.invalidate("orders:42")``."""

    def __init__(self, config: CacheConfig | None = None) -> None:
        self.config = config or CacheConfig()
        self.stats = CacheStats()
        self.origin = os.urandom(8).hex()
        """This store's id on the invalidation channel (its own messages are skipped)."""
        self._l1 = _lru(self.config)
        self._gens: dict[str, int] = {}
        self._flights: Flights[CallToolResult] = Flights()
        self.shared: Any = None
        if self.config.redis_url is not None:
            from millimcp.cache.shared import SharedTier

            self.shared = SharedTier(
                self.config, self.stats, self.origin, self._bump, self.clear_local
            )

    def __repr__(self) -> str:
        tiers = "L1+L2" if self.shared is not None else "L1"
        return f"<CacheStore {tiers} entries={len(self._l1)} in_flight={len(self._flights)}>"

    # -- invalidation ----------------------------------------------------------------------

    async def invalidate(self, *tags: str) -> None:
        """Drop every entry carrying one of ``tags``, here and (through Redis) everywhere."""
        for tag in tags:
            self._bump(tag)
        self.stats.invalidations += len(tags)
        if self.shared is not None and tags:
            await self.shared.invalidate(tags)

    def _bump(self, tag: str) -> None:
        self._gens[tag] = self._gens.get(tag, 0) + 1

    def clear_local(self) -> None:
        """Forget every L1 entry (Redis may have missed telling us about invalidations)."""
        self._l1.clear()

    async def close(self) -> None:
        if self.shared is not None:
            await self.shared.close()

    # -- lookups ---------------------------------------------------------------------------

    async def fetch(
        self,
        tool: str,
        policy: Cache,
        key: Hashable,
        tags: Callable[[], tuple[str, ...]],
        shared: bool,
        run: Run,
    ) -> CallToolResult:
        """The cached result of ``run`` under ``key``, running it once on a miss.

        ``tags()`` formats the entry's tags (only needed on a miss); ``shared`` says
        whether the entry may go to Redis (public entries).
        """
        record = current_record() if TRACE.active else None
        started = clock() if record is not None else 0
        entry = self._l1.get(key)
        if entry is not None:
            gens = self._gens
            if all(gens.get(t, 0) == g for t, g in zip(entry.tags, entry.gens, strict=True)):
                self.stats.hits_l1 += 1
                if record is not None:
                    self._report(record, tool, "hit-l1", clock() - started)
                return entry.result  # type: ignore[no-any-return]
        if self._flights.running(key):
            self.stats.coalesced += 1
            if record is not None:
                self._report(record, tool, "coalesced", clock() - started)
            return await self._flights.run(key, None)
        timing = [0]
        result = await self._flights.run(
            key, self._fill(tool, policy, key, tags(), shared, run, timing)
        )
        if record is not None:
            outcome = "hit-l2" if timing[0] < 0 else "miss"
            self._report(record, tool, outcome, clock() - started - max(timing[0], 0))
        return result

    async def _fill(
        self,
        tool: str,
        policy: Cache,
        key: Hashable,
        tags: tuple[str, ...],
        shared: bool,
        run: Run,
        timing: list[int],
    ) -> CallToolResult:
        """Look in Redis, else run the call; store a successful result in both tiers.

        ``timing[0]`` becomes the nanoseconds spent running the call, or -1 on an L2 hit.
        """
        local_gens = tuple(self._gens.get(tag, 0) for tag in tags)
        remote: tuple[CallToolResult | None, list[int]] | None = None
        l2_key = ""
        if shared and self.shared is not None:
            l2_key = self.shared.entry_key(tool, _digest(key))
            remote = await self.shared.get(l2_key, tags)
            if remote is not None and remote[0] is not None:
                self.stats.hits_l2 += 1
                timing[0] = -1
                self._l1[key] = _Entry(remote[0], tags, local_gens, policy.ttl)
                return remote[0]
        self.stats.misses += 1
        started = clock()
        result = await run()
        timing[0] = clock() - started
        if result.is_error:
            self.stats.errors_not_cached += 1
            return result
        self.stats.stores += 1
        self._l1[key] = _Entry(result, tags, local_gens, policy.ttl)
        if remote is not None:
            ttl = policy.shared_ttl if policy.shared_ttl is not None else policy.ttl
            await self.shared.set(l2_key, result, remote[1], ttl)
        return result

    @staticmethod
    def _report(record: Any, tool: str, outcome: str, elapsed_ns: int) -> None:
        record.cache_ns += elapsed_ns
        record.cache_outcome = outcome
        TRACE.event("cache", (tool, outcome))


def _digest(key: Hashable) -> str:
    """The Redis name of a public L1 key ``(tool, canonical argument bytes)``."""
    canonical = key[1] if isinstance(key, tuple) else repr(key).encode()
    return hashlib.blake2b(canonical, digest_size=16).hexdigest()
