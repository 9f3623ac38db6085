"""Result bases: every result carries ``resultType``; cacheable ones carry TTL and scope."""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from millimcp.protocol.types.base import JSONObject, McpStruct

__all__ = ["CacheScope", "CacheableResult", "EmptyResult", "Result"]

CacheScope: TypeAlias = Literal["public", "private"]


class Result(McpStruct, tag_field="resultType", tag="complete", kw_only=True):
    """A complete result. ``resultType`` is the struct tag, so it is always on the wire."""

    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class EmptyResult(Result, kw_only=True):
    pass


class CacheableResult(Result, kw_only=True):
    """A result with caching hints.

    The 2026-07-28 revision requires both and millimcp's server always sets them; servers of
    the handshake era send neither, so a reply without them reads as None.
    """

    ttl_ms: int | None = None
    cache_scope: CacheScope | None = None
