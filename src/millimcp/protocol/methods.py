"""The method table: what each method's params and result are, and how it is served.

One row per method the server answers. The dispatcher decodes ``params`` into
``MethodSpec.params`` only after the method is found here, and the HTTP binding reads
``name_field`` to check the ``Mcp-Name`` header.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from millimcp.protocol.types import (
    CallToolParams,
    CallToolResult,
    CompleteParams,
    CompleteResult,
    DiscoverResult,
    GetPromptParams,
    GetPromptResult,
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
)

__all__ = ["METHODS", "MethodSpec"]


class MethodSpec(NamedTuple):
    params: type[Any]
    result: type[Any]
    name_field: str | None = None
    """The params field mirrored in the ``Mcp-Name`` header, if any."""
    input_required: bool = False
    """Whether the method may answer with an ``InputRequiredResult`` (MRTR)."""


METHODS: Final[dict[str, MethodSpec]] = {
    "server/discover": MethodSpec(RequestParams, DiscoverResult),
    "tools/list": MethodSpec(PaginatedParams, ListToolsResult),
    "tools/call": MethodSpec(CallToolParams, CallToolResult, "name", input_required=True),
    "resources/list": MethodSpec(PaginatedParams, ListResourcesResult),
    "resources/templates/list": MethodSpec(PaginatedParams, ListResourceTemplatesResult),
    "resources/read": MethodSpec(ReadResourceParams, ReadResourceResult, "uri", True),
    "prompts/list": MethodSpec(PaginatedParams, ListPromptsResult),
    "prompts/get": MethodSpec(GetPromptParams, GetPromptResult, "name", input_required=True),
    "completion/complete": MethodSpec(CompleteParams, CompleteResult),
    "subscriptions/listen": MethodSpec(ListenParams, ListenResult),
}
