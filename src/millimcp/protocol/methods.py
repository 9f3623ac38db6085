"""The method table: what each method's params and result are, and how it is served.

One row per method the server answers. The dispatcher decodes ``params`` into
``MethodSpec.params`` only after the method is found here, and the HTTP binding reads
``name_field`` to check the ``Mcp-Name`` header. ``era`` says which era has the method:
``None`` for both, ``"modern"`` or ``"legacy"`` for one.
"""

from __future__ import annotations

from typing import Any, Final, Literal, NamedTuple

from millimcp.protocol.types import (
    CallToolParams,
    CallToolResult,
    CompleteParams,
    CompleteResult,
    DiscoverResult,
    GetPromptParams,
    GetPromptResult,
    InitializeParams,
    InitializeResult,
    LegacyEmptyResult,
    ListenParams,
    ListenResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedParams,
    ReadResourceParams,
    ReadResourceResult,
    RequestParams,
    SetLevelParams,
    SubscribeParams,
)

__all__ = ["LEGACY_ONLY", "METHODS", "MODERN_ONLY", "MethodSpec"]


class MethodSpec(NamedTuple):
    params: type[Any]
    result: type[Any]
    name_field: str | None = None
    """The params field mirrored in the ``Mcp-Name`` header, if any."""
    input_required: bool = False
    """Whether the method may answer with an ``InputRequiredResult`` (MRTR)."""
    era: Literal["modern", "legacy"] | None = None
    """The only era that has the method; None when both have it."""


METHODS: Final[dict[str, MethodSpec]] = {
    "server/discover": MethodSpec(RequestParams, DiscoverResult, era="modern"),
    "tools/list": MethodSpec(PaginatedParams, ListToolsResult),
    "tools/call": MethodSpec(CallToolParams, CallToolResult, "name", input_required=True),
    "resources/list": MethodSpec(PaginatedParams, ListResourcesResult),
    "resources/templates/list": MethodSpec(PaginatedParams, ListResourceTemplatesResult),
    "resources/read": MethodSpec(ReadResourceParams, ReadResourceResult, "uri", True),
    "prompts/list": MethodSpec(PaginatedParams, ListPromptsResult),
    "prompts/get": MethodSpec(GetPromptParams, GetPromptResult, "name", input_required=True),
    "completion/complete": MethodSpec(CompleteParams, CompleteResult),
    "subscriptions/listen": MethodSpec(ListenParams, ListenResult, era="modern"),
    "initialize": MethodSpec(InitializeParams, InitializeResult, era="legacy"),
    "ping": MethodSpec(RequestParams, LegacyEmptyResult, era="legacy"),
    "logging/setLevel": MethodSpec(SetLevelParams, LegacyEmptyResult, era="legacy"),
    "resources/subscribe": MethodSpec(SubscribeParams, LegacyEmptyResult, era="legacy"),
    "resources/unsubscribe": MethodSpec(SubscribeParams, LegacyEmptyResult, era="legacy"),
}

MODERN_ONLY: Final = frozenset(m for m, spec in METHODS.items() if spec.era == "modern")
LEGACY_ONLY: Final = frozenset(m for m, spec in METHODS.items() if spec.era == "legacy")
