"""Content blocks (tool results, prompt messages, sampling) and resource contents."""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from millimcp.protocol.types.base import Annotations, Icon, JSONObject, McpStruct

__all__ = [
    "AudioContent",
    "BlobResourceContents",
    "ContentBlock",
    "EmbeddedResource",
    "ImageContent",
    "ResourceContents",
    "ResourceLink",
    "TextContent",
    "TextResourceContents",
    "ToolResultContent",
    "ToolUseContent",
]


class TextResourceContents(McpStruct, kw_only=True):
    uri: str
    text: str
    mime_type: str | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class BlobResourceContents(McpStruct, kw_only=True):
    uri: str
    blob: str
    """Base64 of the bytes."""
    mime_type: str | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


ResourceContents: TypeAlias = TextResourceContents | BlobResourceContents


class TextContent(McpStruct, tag_field="type", tag="text", kw_only=True):
    text: str
    annotations: Annotations | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ImageContent(McpStruct, tag_field="type", tag="image", kw_only=True):
    data: str
    """Base64 of the image bytes."""
    mime_type: str
    annotations: Annotations | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class AudioContent(McpStruct, tag_field="type", tag="audio", kw_only=True):
    data: str
    mime_type: str
    annotations: Annotations | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ResourceLink(McpStruct, tag_field="type", tag="resource_link", kw_only=True):
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    icons: list[Icon] | None = None
    annotations: Annotations | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class EmbeddedResource(McpStruct, tag_field="type", tag="resource", kw_only=True):
    resource: TextResourceContents | BlobResourceContents
    annotations: Annotations | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ToolUseContent(McpStruct, tag_field="type", tag="tool_use", kw_only=True):
    id: str
    name: str
    input: JSONObject
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ToolResultContent(McpStruct, tag_field="type", tag="tool_result", kw_only=True):
    tool_use_id: str
    content: list[Any]
    structured_content: JSONObject | None = None
    is_error: bool | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


ContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource
)
