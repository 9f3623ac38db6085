"""Caching tool results: L1 in process (TTL/LRU), L2 Redis, single-flight, tag invalidation.

``@server.tool(cache=Cache(ttl=30, tags=["orders:{user_id}"]))`` caches a tool's
successful results; ``@server.tool(invalidates=["orders:{user_id}"])`` or
``await server.cache.invalidate("orders:42")`` drops them in every process. cachetools and
redis (extra ``cache``) are imported when a store is made.
"""

from __future__ import annotations

from millimcp.cache.policy import Cache, CacheConfig
from millimcp.cache.stats import CacheStats
from millimcp.cache.store import CacheStore
from millimcp.cache.tool import CachedTool, Invalidates

__all__ = ["Cache", "CacheConfig", "CacheStats", "CacheStore", "CachedTool", "Invalidates"]
