"""A tool's cache policy bound to a store: how one call is looked up, and what it invalidates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from millimcp.cache.keys import TagTemplate, argument_key, default_principal
from millimcp.cache.policy import Cache
from millimcp.cache.store import CacheStore, Run
from millimcp.observe import TRACE
from millimcp.protocol.types import CallToolResult

__all__ = ["CachedTool", "Invalidates"]


class CachedTool:
    """``@server.tool(cache=Cache(...))``: the policy, its tag templates and the store."""

    __slots__ = ("name", "policy", "principal", "private", "store", "tags")

    def __init__(
        self, store: CacheStore, policy: Cache, name: str, parameters: Sequence[str]
    ) -> None:
        self.store = store
        self.policy = policy
        self.name = name
        self.tags = tuple(TagTemplate(t, parameters, f"tool {name!r}") for t in policy.tags)
        self.private = policy.scope == "private"
        self.principal = policy.principal or default_principal

    def __repr__(self) -> str:
        return f"<CachedTool {self.name} ttl={self.policy.ttl} {self.policy.scope}>"

    async def call(self, kwargs: dict[str, Any], ctx: Any, run: Run) -> CallToolResult:
        canonical = argument_key(kwargs, self.policy.key)
        if self.private:
            principal = self.principal(ctx)
            if principal is None:  # nobody to keep a private entry for
                self.store.stats.bypassed += 1
                if TRACE.active:
                    TRACE.event("cache", (self.name, "bypass"))
                return await run()
            key: tuple[Any, ...] = (self.name, canonical, principal)
        else:
            key = (self.name, canonical)

        def tags() -> tuple[str, ...]:
            return tuple(t.format(kwargs) for t in self.tags)

        return await self.store.fetch(self.name, self.policy, key, tags, not self.private, run)


class Invalidates:
    """``@server.tool(invalidates=["orders:{user_id}"])``: tags dropped after a success."""

    __slots__ = ("store", "templates")

    def __init__(
        self, store: CacheStore, templates: Sequence[str], name: str, parameters: Sequence[str]
    ) -> None:
        self.store = store
        self.templates = tuple(TagTemplate(t, parameters, f"tool {name!r}") for t in templates)

    async def after(self, kwargs: dict[str, Any], result: CallToolResult) -> None:
        if not result.is_error:
            await self.store.invalidate(*(t.format(kwargs) for t in self.templates))
