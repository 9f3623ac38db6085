"""The order service's side of the recommendation service (``orders.recommender``), three ways.

``BlockingRecommender`` is the naive path (S6.3 ``async_recs`` off): ``urllib`` on a thread, a
new connection per call. ``PooledRecommender`` is the tuned one: aiohttp with a kept-alive
pool, the event loop waiting. ``CachedRecommender`` (``recs_cache``) keeps either's answers in
millimcp's cache store, tagged ``customer:{id}`` so that ``create_order`` can drop them.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from millimcp import Cache, Server
from millimcp.protocol.types import CallToolResult
from orders.queries import Offload

__all__ = ["BlockingRecommender", "CachedRecommender", "PooledRecommender", "Recommender"]


class Recommender:
    """Asks the recommendation service for a customer's suggestions (its JSON answer)."""

    async def get(self, customer_id: int, limit: int, headers: dict[str, str]) -> dict[str, Any]:
        raise NotImplementedError

    async def close(self) -> None:
        pass


class BlockingRecommender(Recommender):
    """``urllib``: a new connection per call (it sends ``Connection: close``), and the thread
    it runs on waits for the whole answer."""

    def __init__(self, base: str, offload: Offload, decode: Callable[[bytes], Any]) -> None:
        self.base = base.rstrip("/")
        self.offload = offload
        self.decode = decode

    async def get(self, customer_id: int, limit: int, headers: dict[str, str]) -> dict[str, Any]:
        return await self.offload(self._get, customer_id, limit, headers)

    def _get(self, customer_id: int, limit: int, headers: dict[str, str]) -> dict[str, Any]:
        query = urllib.parse.urlencode({"customer_id": customer_id, "limit": limit})
        request = urllib.request.Request(f"{self.base}/recommendations?{query}", headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            return self.decode(response.read())  # type: ignore[no-any-return]


class PooledRecommender(Recommender):
    """aiohttp with a kept-alive pool (50 connections); the event loop waits, no thread."""

    def __init__(self, base: str, decode: Callable[[bytes], Any]) -> None:
        import aiohttp

        self.base = base.rstrip("/")
        self.decode = decode
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=50, keepalive_timeout=30, ttl_dns_cache=300),
            timeout=aiohttp.ClientTimeout(total=30),
        )

    async def get(self, customer_id: int, limit: int, headers: dict[str, str]) -> dict[str, Any]:
        params = {"customer_id": str(customer_id), "limit": str(limit)}
        async with self.session.get(
            f"{self.base}/recommendations", params=params, headers=headers
        ) as response:
            response.raise_for_status()
            return self.decode(await response.read())  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self.session.close()


class CachedRecommender(Recommender):
    """The answers of ``inner`` kept in millimcp's cache store for ``ttl`` seconds, tagged
    ``customer:{id}`` (``create_order`` invalidates the tag); identical concurrent asks run
    once."""

    def __init__(self, inner: Recommender, server: Server, ttl: float) -> None:
        self.inner = inner
        self.store = server.cache
        self.policy = Cache(ttl=ttl)

    async def get(self, customer_id: int, limit: int, headers: dict[str, str]) -> dict[str, Any]:
        async def ask() -> CallToolResult:
            answer = await self.inner.get(customer_id, limit, headers)
            return CallToolResult(content=[], structured_content=answer)

        result = await self.store.fetch(
            "recommender",
            self.policy,
            ("recommender", customer_id, limit),
            lambda: (f"customer:{customer_id}",),
            False,  # in this process only
            ask,
        )
        answer: dict[str, Any] | None = result.structured_content
        if answer is None:  # ask() always sets it
            raise RuntimeError("the cache store returned a result without the answer")
        return answer

    async def close(self) -> None:
        await self.inner.close()
