"""What a client learns from the server's lists: every page of each, kept for the server's
``ttlMs``, and what each tool's definition says about calling it.

A list is read page by page (``nextCursor``) into one list, kept in the
:class:`~millimcp.client.list_cache.ListCache` while the smallest ``ttlMs`` of its pages
allows (modern era only: handshake-era lists carry no TTL). From ``tools/list`` the client
learns, per tool, its own timeout (``dev.millimcp/timeoutMs`` in ``Tool._meta``, plus a
grace: the server enforces it and answers), whether a retry is safe (``readOnlyHint`` or
``idempotentHint``), and its ``x-mcp-header`` declarations (over HTTP; a tool that breaks
the spec's rules for them is left out, with a warning).
"""

from __future__ import annotations

import logging
from typing import Any, Final, NamedTuple

from millimcp.client.envelope import Envelope
from millimcp.client.list_cache import ListCache
from millimcp.client.pipeline import Pipeline
from millimcp.errors import InvalidHeaderDeclaration
from millimcp.protocol.header_params import HeaderParam, header_params
from millimcp.protocol.methods import reply_decoder
from millimcp.protocol.types import Tool
from millimcp.resilience.policy import Timeout

__all__ = ["TIMEOUT_META_KEY", "TOOL_TIMEOUT_GRACE_S", "Catalog", "ToolInfo"]

log: Final = logging.getLogger("millimcp.client")

TIMEOUT_META_KEY: Final = "dev.millimcp/timeoutMs"
"""Where a millimcp server advertises a tool's own timeout (``Tool._meta``)."""
TOOL_TIMEOUT_GRACE_S: Final = 0.5
"""Added to a tool's advertised timeout: the server enforces it and answers; the client's
deadline only catches a server that does not."""
_MAX_PAGES: Final = 1000
_PAGES: Final[dict[str, tuple[str, str]]] = {
    "tools": ("tools/list", "tools"),
    "resources": ("resources/list", "resources"),
    "templates": ("resources/templates/list", "resource_templates"),
    "prompts": ("prompts/list", "prompts"),
}


class ToolInfo(NamedTuple):
    """What the client learned about a tool from ``tools/list``."""

    timeout: float | None
    idempotent: bool
    headers: tuple[HeaderParam, ...]


class Catalog:
    """The server's lists as one client reads them."""

    __slots__ = ("envelope", "lists", "pipeline", "tools")

    def __init__(self, pipeline: Pipeline, envelope: Envelope) -> None:
        self.pipeline = pipeline
        self.envelope = envelope
        self.lists = ListCache()
        self.tools: dict[str, ToolInfo] = {}
        """By name, from the last ``tools/list``."""

    def __repr__(self) -> str:
        return f"<Catalog tools={len(self.tools)} {self.lists!r}>"

    async def read(self, kind: str, timeout: Timeout | None) -> list[Any]:
        """Every item of one list (``tools``, ``resources``, ``templates``, ``prompts``)."""
        cached = self.lists.get(kind)
        if cached is not None:
            return cached
        method, field = _PAGES[kind]
        decoder = reply_decoder(method)
        items: list[Any] = []
        cursor: str | None = None
        ttl: int | None = None
        for _ in range(_MAX_PAGES):
            params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
            page = await self.pipeline.call(method, params, decoder, timeout=timeout)
            items.extend(getattr(page, field))
            ttl = page.ttl_ms if ttl is None else min(ttl, page.ttl_ms or 0)
            cursor = page.next_cursor
            if not cursor:
                break
        if kind == "tools":
            items = self._learn_tools(items)
        self.lists.put(kind, items, ttl if self.envelope.era == "modern" else None)
        return items

    def _learn_tools(self, tools: list[Tool]) -> list[Tool]:
        """Remember each tool's timeout, idempotency and headers; drop invalid ones (HTTP)."""
        known: dict[str, ToolInfo] = {}
        kept: list[Tool] = []
        http = self.envelope.http
        for tool in tools:
            try:
                headers = header_params(tool.input_schema) if http else ()
            except InvalidHeaderDeclaration as exc:
                log.warning("ignoring tool %r: invalid x-mcp-header: %s", tool.name, exc)
                continue
            timeout_ms = (tool.meta or {}).get(TIMEOUT_META_KEY)
            timeout = None
            if isinstance(timeout_ms, int | float) and timeout_ms > 0:
                timeout = timeout_ms / 1000 + TOOL_TIMEOUT_GRACE_S
            notes = tool.annotations
            idempotent = notes is not None and bool(notes.read_only_hint or notes.idempotent_hint)
            known[tool.name] = ToolInfo(timeout, idempotent, headers)
            kept.append(tool)
        self.tools = known
        return kept
