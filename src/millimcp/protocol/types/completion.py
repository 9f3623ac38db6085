"""Argument completion (``completion/complete``)."""

from __future__ import annotations

from typing import Literal

import msgspec

from millimcp.protocol.types.base import McpStruct, RequestMeta
from millimcp.protocol.types.results import Result

__all__ = [
    "CompleteArgument",
    "CompleteContext",
    "CompleteParams",
    "CompleteResult",
    "Completion",
    "CompletionRef",
]


class CompletionRef(McpStruct, kw_only=True):
    """``ref/prompt`` (with ``name``) or ``ref/resource`` (with ``uri``)."""

    type: Literal["ref/prompt", "ref/resource"]
    name: str | None = None
    uri: str | None = None


class CompleteArgument(McpStruct, kw_only=True):
    name: str
    value: str


class CompleteContext(McpStruct, kw_only=True):
    arguments: dict[str, str] | None = None


class CompleteParams(McpStruct, kw_only=True):
    ref: CompletionRef
    argument: CompleteArgument
    context: CompleteContext | None = None
    meta: RequestMeta | None = msgspec.field(default=None, name="_meta")


class Completion(McpStruct, kw_only=True):
    values: list[str]
    total: int | None = None
    has_more: bool | None = None


class CompleteResult(Result, kw_only=True):
    completion: Completion
