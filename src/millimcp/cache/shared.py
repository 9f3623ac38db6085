"""The shared tier: Redis (redis-py asyncio, hiredis), and invalidation fan-out by pub/sub.

Keys (``ns`` is ``CacheConfig.namespace``):

- ``{ns}:e:{tool}:{digest}``: an entry, JSON ``{"g": [generations...], "r": result}``,
  with a TTL;
- ``{ns}:g:{tag}``: the generation of a tag, an integer that invalidation increments;
- channel ``{ns}:invalidate``: ``[origin, tag]`` for each invalidation.

An entry is valid while the generations stored with it equal the tags' current ones: a
lookup reads the entry and the generations in one ``MGET``. Generations are read before
the tool runs, so an invalidation during the run makes the new entry stale at once.

When Redis fails the tier steps aside for ``retry_after_s``: calls go on with L1 only and
each skipped or failed operation counts as a fallback. Invalidations that could not be sent
are sent when Redis answers again; a pub/sub connection that had to reconnect clears L1,
since messages may have been lost meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from millimcp.cache.policy import CacheConfig
from millimcp.cache.stats import CacheStats
from millimcp.errors import ConfigurationError
from millimcp.observe import TRACE
from millimcp.protocol.types import CallToolResult

__all__ = ["SharedTier"]

log: Final = logging.getLogger("millimcp.cache")


class _Stored(msgspec.Struct):
    g: list[int]
    r: CallToolResult


class _StoredResult(msgspec.Struct, rename="camel"):
    """A stored result read back: content blocks stay raw JSON, sent on as they are."""

    content: list[msgspec.Raw]
    structured_content: Any = None


class _Loaded(msgspec.Struct):
    g: list[int]
    r: _StoredResult


_decode_stored: Final = msgspec.json.Decoder(_Loaded)
_decode_message: Final = msgspec.json.Decoder(tuple[str, str])


def _redis_module() -> Any:
    try:
        import redis.asyncio
        import redis.exceptions
    except ImportError:
        raise ConfigurationError(
            "the shared cache tier needs redis: pip install 'millimcp[cache]'"
        ) from None
    return redis


class SharedTier:
    """Redis as the second cache tier and the invalidation bus of every process."""

    def __init__(
        self,
        config: CacheConfig,
        stats: CacheStats,
        origin: str,
        on_invalidate: Callable[[str], None],
        on_resubscribe: Callable[[], None],
    ) -> None:
        assert config.redis_url is not None
        self.config = config
        self.stats = stats
        self.origin = origin
        self._on_invalidate = on_invalidate
        self._on_resubscribe = on_resubscribe
        self._redis = _redis_module()
        self._errors: tuple[type[BaseException], ...] = (
            self._redis.exceptions.RedisError,
            OSError,
            TimeoutError,
        )
        ns = config.namespace
        self._entry_prefix = f"{ns}:e:"
        self._gen_prefix = f"{ns}:g:"
        self.channel = f"{ns}:invalidate"
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: asyncio.Task[None] | None = None
        self._retry_at = 0.0
        self._pending: set[str] = set()

    def __repr__(self) -> str:
        state = "up" if self.usable() else "down"
        return f"<SharedTier {self.config.redis_url} {state} pending={len(self._pending)}>"

    # -- connection ----------------------------------------------------------------------

    def _connect(self) -> Any:
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        timeout = self.config.redis_timeout_s
        return self._redis.asyncio.Redis.from_url(
            self.config.redis_url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )

    async def _ready(self) -> Any:
        """The client of the running loop; starts the invalidation listener once and waits
        (up to the timeout) until it is subscribed, so that no invalidation goes unheard."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._connect()
            self._loop = loop
            subscribed: asyncio.Future[None] = loop.create_future()
            self._listener = loop.create_task(self._listen(self._connect(), subscribed))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(subscribed), self.config.redis_timeout_s)
        return self._client

    def usable(self) -> bool:
        return time.monotonic() >= self._retry_at

    def _failed(self, what: str, exc: BaseException | None) -> None:
        self.stats.fallbacks += 1
        if exc is not None:
            if self.usable():
                log.warning("redis %s failed (%s): using the in-process tier only", what, exc)
            self._retry_at = time.monotonic() + self.config.retry_after_s
        if TRACE.active:
            TRACE.event("cache_fallback", (what,))

    async def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, *self._errors):
                await listener
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(*self._errors, RuntimeError):
                await client.aclose()

    # -- entries ---------------------------------------------------------------------------

    def entry_key(self, tool: str, digest: str) -> str:
        return f"{self._entry_prefix}{tool}:{digest}"

    async def get(
        self, key: str, tags: Sequence[str]
    ) -> tuple[CallToolResult | None, list[int]] | None:
        """(entry if valid, current generations of ``tags``); None when Redis is unusable."""
        if not self.usable():
            self._failed("get", None)
            return None
        try:
            client = await self._ready()
            if self._pending:
                await self._flush_pending(client)
            values = await client.mget([key, *(self._gen_prefix + tag for tag in tags)])
        except self._errors as exc:
            self._failed("get", exc)
            return None
        gens = [0 if raw is None else int(raw) for raw in values[1:]]
        raw = values[0]
        if raw is None:
            return None, gens
        try:
            stored = _decode_stored.decode(raw)
        except msgspec.DecodeError:
            return None, gens  # written by an incompatible version: overwrite it
        if stored.g != gens:
            return None, gens
        content: Any = stored.r.content
        return CallToolResult(content=content, structured_content=stored.r.structured_content), gens

    async def set(self, key: str, result: CallToolResult, gens: list[int], ttl: float) -> None:
        if not self.usable():
            self._failed("set", None)
            return
        try:
            client = await self._ready()
            await client.set(key, msgspec.json.encode(_Stored(gens, result)), px=int(ttl * 1000))
        except self._errors as exc:
            self._failed("set", exc)

    # -- invalidation ----------------------------------------------------------------------

    async def invalidate(self, tags: Sequence[str]) -> None:
        """Bump the tags' generations and tell every process; queued while Redis is down."""
        self._pending.update(tags)
        if not self.usable():
            self._failed("invalidate", None)
            return
        try:
            await self._flush_pending(await self._ready())
        except self._errors as exc:
            self._failed("invalidate", exc)

    async def _flush_pending(self, client: Any) -> None:
        tags = sorted(self._pending)
        async with client.pipeline(transaction=False) as pipe:
            for tag in tags:
                pipe.incr(self._gen_prefix + tag)
                pipe.publish(self.channel, msgspec.json.encode((self.origin, tag)))
            await pipe.execute()
        self._pending.difference_update(tags)

    async def _listen(self, client: Any, subscribed: asyncio.Future[None]) -> None:
        """Apply other processes' invalidations; resubscribe (and clear L1) after a failure."""
        pubsub = None
        first = True
        try:
            while True:
                try:
                    if pubsub is None:
                        pubsub = client.pubsub()
                        await pubsub.subscribe(self.channel)
                        if not subscribed.done():
                            subscribed.set_result(None)
                        if not first:
                            self._on_resubscribe()
                        first = False
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
                except self._errors as exc:
                    self._failed("subscribe", exc)
                    first = False
                    if not subscribed.done():
                        subscribed.set_result(None)
                    if pubsub is not None:
                        with contextlib.suppress(*self._errors, RuntimeError):
                            await pubsub.aclose()
                        pubsub = None
                    await asyncio.sleep(self.config.retry_after_s)
                    continue
                if message is None or message.get("type") != "message":
                    continue
                try:
                    origin, tag = _decode_message.decode(message["data"])
                except msgspec.DecodeError:
                    continue
                if origin != self.origin:
                    self.stats.remote_invalidations += 1
                    self._on_invalidate(tag)
        finally:
            with contextlib.suppress(*self._errors, RuntimeError):
                if pubsub is not None:
                    await pubsub.aclose()
                await client.aclose()
