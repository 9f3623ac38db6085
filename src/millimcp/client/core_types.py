"""Result types the client decodes replies into, and their conversion to protocol types.

The protocol structs (:mod:`millimcp.protocol.types`) are written for encoding: a resource's
contents are an untagged union (text or blob), which msgspec cannot decode, and cacheable
results require ``ttlMs``/``cacheScope``, which handshake-era servers never send. These
mirrors decode what any server of either era sends, in one pass each: unknown fields are
ignored, a missing ``resultType`` reads as ``"complete"`` (the spec's rule), and resource
contents are told apart by their ``text``/``blob`` field. What the application gets back is
built from the protocol types.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import msgspec

from millimcp.protocol.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    Prompt,
    PromptMessage,
    Resource,
    ResourceLink,
    ResourceTemplate,
    ServerCapabilities,
    TextContent,
    TextResourceContents,
    Tool,
)
from millimcp.protocol.types.base import Annotations, JSONObject, McpStruct, Role

__all__ = [
    "AnyContents",
    "Block",
    "CallResult",
    "DiscoverPage",
    "PromptPage",
    "PromptResult",
    "ReadResult",
    "ResourcePage",
    "TemplatePage",
    "ToolPage",
    "blocks",
    "contents",
]


class _Lenient(msgspec.Struct, rename="camel", kw_only=True):
    """Decode-only base: camelCase, unknown fields ignored."""


class _Complete(_Lenient, tag_field="resultType", tag="complete", kw_only=True):
    """A complete result; ``resultType`` may be absent (handshake-era servers)."""

    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class AnyContents(_Lenient, kw_only=True):
    """Resource contents of either kind: ``text`` or ``blob`` is set."""

    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class _Embedded(McpStruct, tag_field="type", tag="resource", kw_only=True):
    resource: AnyContents
    annotations: Annotations | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


Block: TypeAlias = TextContent | ImageContent | AudioContent | ResourceLink | _Embedded


class CallResult(_Complete, kw_only=True):
    content: list[Block] = msgspec.field(default_factory=list)
    structured_content: Any = None
    is_error: bool | None = None


class ReadResult(_Complete, kw_only=True):
    contents: list[AnyContents] = msgspec.field(default_factory=list)
    ttl_ms: int | None = None
    cache_scope: str | None = None


class _PromptMessage(_Lenient, kw_only=True):
    role: Role
    content: Block


class PromptResult(_Complete, kw_only=True):
    messages: list[_PromptMessage] = msgspec.field(default_factory=list)
    description: str | None = None


class _Page(_Complete, kw_only=True):
    next_cursor: str | None = None
    ttl_ms: int | None = None
    cache_scope: str | None = None


class ToolPage(_Page, kw_only=True):
    tools: list[Tool] = msgspec.field(default_factory=list)


class ResourcePage(_Page, kw_only=True):
    resources: list[Resource] = msgspec.field(default_factory=list)


class TemplatePage(_Page, kw_only=True):
    resource_templates: list[ResourceTemplate] = msgspec.field(default_factory=list)


class PromptPage(_Page, kw_only=True):
    prompts: list[Prompt] = msgspec.field(default_factory=list)


class DiscoverPage(_Page, kw_only=True):
    supported_versions: list[str] = msgspec.field(default_factory=list)
    capabilities: ServerCapabilities = msgspec.field(default_factory=ServerCapabilities)
    instructions: str | None = None


_CONTENT_TYPES: Final = (TextContent, ImageContent, AudioContent, ResourceLink)


def contents(item: AnyContents) -> TextResourceContents | BlobResourceContents:
    """The protocol type of one resource's contents."""
    if item.blob is not None and item.text is None:
        return BlobResourceContents(
            uri=item.uri, blob=item.blob, mime_type=item.mime_type, meta=item.meta
        )
    return TextResourceContents(
        uri=item.uri, text=item.text or "", mime_type=item.mime_type, meta=item.meta
    )


def blocks(items: list[Block]) -> list[Any]:
    """Content blocks as protocol types (only embedded resources need converting)."""
    for item in items:
        if type(item) is _Embedded:
            return [_block(block) for block in items]
    return items


def _block(item: Block) -> Any:
    if isinstance(item, _Embedded):
        return EmbeddedResource(
            resource=contents(item.resource), annotations=item.annotations, meta=item.meta
        )
    return item


def prompt_messages(result: PromptResult) -> list[PromptMessage]:
    return [PromptMessage(role=m.role, content=_block(m.content)) for m in result.messages]
