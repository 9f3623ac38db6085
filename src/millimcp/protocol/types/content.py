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
    "narrow_block",
    "narrow_blocks",
]


class ResourceContents(McpStruct, kw_only=True):
    """A resource's contents as a peer sends them: ``text`` or ``blob`` (base64) is set.

    The spec's two kinds carry no tag, so they are read as this one type; :meth:`narrow`
    gives the specific one. Build replies with :class:`TextResourceContents` or
    :class:`BlobResourceContents`.
    """

    uri: str
    text: str | None = None
    blob: str | None = None
    """Base64 of the bytes."""
    mime_type: str | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")

    def narrow(self) -> TextResourceContents | BlobResourceContents:
        """The specific kind: blob contents when only ``blob`` is set, else text."""
        if isinstance(self, TextResourceContents | BlobResourceContents):
            return self
        if self.blob is not None and self.text is None:
            return BlobResourceContents(
                uri=self.uri, blob=self.blob, mime_type=self.mime_type, meta=self.meta
            )
        return TextResourceContents(
            uri=self.uri, text=self.text or "", mime_type=self.mime_type, meta=self.meta
        )


class TextResourceContents(ResourceContents, kw_only=True):
    text: str


class BlobResourceContents(ResourceContents, kw_only=True):
    blob: str
    """Base64 of the bytes."""


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
    resource: ResourceContents
    """Text or blob contents (:meth:`ResourceContents.narrow` tells which, when read)."""
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


def narrow_blocks(blocks: list[Any]) -> list[Any]:
    """Content blocks as read from a peer, with embedded contents narrowed to their kind."""
    for block in blocks:
        if type(block) is EmbeddedResource and type(block.resource) is ResourceContents:
            return [narrow_block(item) for item in blocks]
    return blocks


def narrow_block(block: Any) -> Any:
    """One content block with its embedded contents (if any) narrowed to their kind."""
    if type(block) is EmbeddedResource and type(block.resource) is ResourceContents:
        return msgspec.structs.replace(block, resource=block.resource.narrow())
    return block
