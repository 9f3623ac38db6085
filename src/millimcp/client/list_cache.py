"""List results kept for as long as the server says (``ttlMs``), dropped on ``list_changed``.

Modern-era list results carry ``ttlMs`` and ``cacheScope``; a list is reused until its TTL
passes or the server announces a change (``notifications/*/list_changed``). Handshake-era
results carry no TTL and are never cached. One client is one authorization context, so
``private`` and ``public`` results are both kept (a cache shared between clients would have
to key ``private`` ones by credentials).
"""

from __future__ import annotations

import time
from typing import Any, Final

__all__ = ["LIST_CHANGED", "ListCache"]

LIST_CHANGED: Final = {
    "notifications/tools/list_changed": ("tools",),
    "notifications/prompts/list_changed": ("prompts",),
    "notifications/resources/list_changed": ("resources", "templates"),
}
"""Which cached lists a ``list_changed`` notification invalidates."""


class ListCache:
    """Full lists (every page) by kind: ``tools``, ``resources``, ``templates``, ``prompts``."""

    __slots__ = ("_clock", "_entries", "hits")

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[str, tuple[float, list[Any]]] = {}
        self.hits = 0

    def __repr__(self) -> str:
        return f"<ListCache {sorted(self._entries)} hits={self.hits}>"

    def get(self, kind: str) -> list[Any] | None:
        entry = self._entries.get(kind)
        if entry is None:
            return None
        expires, items = entry
        if self._clock() >= expires:
            del self._entries[kind]
            return None
        self.hits += 1
        return items

    def put(self, kind: str, items: list[Any], ttl_ms: int | None) -> None:
        """Keep ``items`` for ``ttl_ms`` (None or 0: not at all)."""
        if not ttl_ms or ttl_ms <= 0:
            self._entries.pop(kind, None)
            return
        self._entries[kind] = (self._clock() + ttl_ms / 1000, items)

    def invalidate(self, *kinds: str) -> None:
        """Forget the given kinds (all of them when none is given)."""
        if not kinds:
            self._entries.clear()
        for kind in kinds:
            self._entries.pop(kind, None)

    def on_notification(self, method: str) -> bool:
        """Invalidate what a ``list_changed`` notification names; whether it was one."""
        kinds = LIST_CHANGED.get(method)
        if kinds is None:
            return False
        self.invalidate(*kinds)
        return True
