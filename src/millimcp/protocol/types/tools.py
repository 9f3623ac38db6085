"""Tools: listing, calling, results."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from millimcp.protocol.types.base import Icon, JSONObject, McpStruct, PaginatedParams, RequestMeta
from millimcp.protocol.types.content import ContentBlock, TextContent
from millimcp.protocol.types.results import CacheableResult, Result

__all__ = [
    "CallToolParams",
    "CallToolResult",
    "ListToolsResult",
    "TextResultTemplate",
    "Tool",
    "ToolAnnotations",
]


class ToolAnnotations(McpStruct, kw_only=True):
    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


class Tool(McpStruct, kw_only=True):
    name: str
    input_schema: JSONObject
    title: str | None = None
    description: str | None = None
    output_schema: JSONObject | None = None
    annotations: ToolAnnotations | None = None
    icons: list[Icon] | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ListToolsParams(PaginatedParams, kw_only=True):
    pass


class ListToolsResult(CacheableResult, kw_only=True):
    tools: list[Tool]
    next_cursor: str | None = None


class CallToolParams(McpStruct, kw_only=True, gc=False):
    """``tools/call`` params. ``arguments`` stays raw until the tool's own type decodes it.
    Not tracked by the collector (decoded per request, never in a cycle)."""

    name: str
    arguments: msgspec.Raw = msgspec.Raw(b"")
    """Raw JSON of the arguments object; empty when the client sent none."""
    meta: RequestMeta | None = msgspec.field(default=None, name="_meta")
    input_responses: dict[str, msgspec.Raw] | None = None
    request_state: str | None = None


class CallToolResult(Result, kw_only=True):
    content: list[ContentBlock]
    structured_content: Any | None = None
    is_error: bool | None = None


_ENCODE: Final = msgspec.json.Encoder().encode


class TextResultTemplate:
    """A ``CallToolResult`` of one text block, pre-encoded around its text.

    ``template.render(text)`` is the :class:`msgspec.Raw` of exactly the bytes that encoding
    ``CallToolResult(content=[TextContent(text=text)], meta=meta)`` gives (the template is cut
    from that very encoding): ``head + encoded text + tail``, no structs per call (a hot path
    may concatenate :attr:`parts` itself). The reply encoder
    (:func:`millimcp.protocol.jsonrpc.encode_result`) writes a ``Raw`` result as it is.
    """

    __slots__ = ("parts",)

    def __init__(self, meta: JSONObject | None = None) -> None:
        mark = "\x00text\x00"
        whole = _ENCODE(CallToolResult(content=[TextContent(text=mark)], meta=meta))
        head, _, tail = whole.partition(_ENCODE(mark))
        self.parts: tuple[bytes, bytes] = (head, tail)
        """The bytes before and after the encoded text."""

    def render(self, text: str) -> msgspec.Raw:
        head, tail = self.parts
        return msgspec.Raw(head + _ENCODE(text) + tail)
