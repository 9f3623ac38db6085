"""Prompts: listing and getting."""

from __future__ import annotations

import msgspec

from millimcp.protocol.types.base import Icon, JSONObject, McpStruct, RequestMeta, Role
from millimcp.protocol.types.content import ContentBlock
from millimcp.protocol.types.results import CacheableResult, Result

__all__ = [
    "GetPromptParams",
    "GetPromptResult",
    "ListPromptsResult",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
]


class PromptArgument(McpStruct, kw_only=True):
    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None


class Prompt(McpStruct, kw_only=True):
    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgument] | None = None
    icons: list[Icon] | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ListPromptsResult(CacheableResult, kw_only=True):
    prompts: list[Prompt]
    next_cursor: str | None = None


class GetPromptParams(McpStruct, kw_only=True):
    name: str
    arguments: dict[str, str] | None = None
    meta: RequestMeta | None = msgspec.field(default=None, name="_meta")
    input_responses: dict[str, msgspec.Raw] | None = None
    request_state: str | None = None


class PromptMessage(McpStruct, kw_only=True):
    role: Role
    content: ContentBlock


class GetPromptResult(Result, kw_only=True):
    messages: list[PromptMessage]
    description: str | None = None
