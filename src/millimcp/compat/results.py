"""What FastMCP-family tools return, turned into millimcp's wire values.

``Image``/``Audio``/``File`` are the helpers of the three APIs; ``mcp.types`` objects
(pydantic models of the official SDK or of ``mcp-types``) are dumped by alias and converted
into millimcp's structs. Lists are split into one content block per item, other values are
JSON text indented by 2, as the SDK's ``_convert_to_content`` does.
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Any, Final

import msgspec
import pydantic_core

from millimcp.protocol.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

__all__ = [
    "Audio",
    "File",
    "Image",
    "call_result",
    "from_pydantic",
    "is_content_type",
    "to_content",
    "to_prompt_message",
]

_BLOCKS: Final = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)
_BLOCK_NAMES: Final = frozenset(
    {"TextContent", "ImageContent", "AudioContent", "ResourceLink", "EmbeddedResource"}
)
_IMAGE_TYPES: Final = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
_AUDIO_TYPES: Final = {
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".flac": "audio/flac",
    ".aac": "audio/aac",
    ".m4a": "audio/mp4",
}


class _Media:
    """Bytes from ``path=`` or ``data=``, with a MIME type from ``format=`` or the suffix."""

    _kind = "image"
    _types: dict[str, str] = _IMAGE_TYPES
    _fallback = "application/octet-stream"
    _default = "image/png"

    def __init__(
        self, path: str | Path | None = None, data: bytes | None = None, format: str | None = None
    ) -> None:
        if (path is None) == (data is None):
            raise ValueError("Either path or data must be provided, not both")
        self.path = Path(path) if path is not None else None
        self.data = data
        self._format = format
        self._mime_type = self._mime()

    def _mime(self) -> str:
        if self._format:
            return f"{self._kind}/{self._format.lower()}"
        if self.path is not None:
            return self._types.get(self.path.suffix.lower(), self._fallback)
        return self._default

    def _b64(self) -> str:
        data = self.path.read_bytes() if self.path is not None else self.data or b""
        return base64.b64encode(data).decode("ascii")


class Image(_Media):
    """An image result (``mcp.server.fastmcp.Image``, ``fastmcp.utilities.types.Image``)."""

    def to_image_content(self) -> ImageContent:
        return ImageContent(data=self._b64(), mime_type=self._mime_type)


class Audio(_Media):
    """An audio result."""

    _kind = "audio"
    _types = _AUDIO_TYPES
    _default = "audio/wav"

    def to_audio_content(self) -> AudioContent:
        return AudioContent(data=self._b64(), mime_type=self._mime_type)


class File(_Media):
    """A file result (fastmcp): an embedded resource, text when its type is textual."""

    _kind = "application"
    _types = {}
    _default = "application/octet-stream"

    def __init__(
        self,
        path: str | Path | None = None,
        data: bytes | None = None,
        format: str | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(path, data, format)
        self.name = name or (self.path.stem if self.path is not None else None)
        self.description = description
        if self.path is not None and not format:
            self._mime_type = mimetypes.guess_type(self.path.name)[0] or self._fallback

    def to_resource_content(self) -> EmbeddedResource:
        uri = f"file:///{self.name or 'resource'}.{self._mime_type.split('/')[-1]}"
        raw = self.path.read_bytes() if self.path is not None else self.data or b""
        if self._mime_type.startswith("text/"):
            text = TextResourceContents(uri=uri, text=raw.decode(), mime_type=self._mime_type)
            return EmbeddedResource(resource=text)
        blob = BlobResourceContents(
            uri=uri, blob=base64.b64encode(raw).decode("ascii"), mime_type=self._mime_type
        )
        return EmbeddedResource(resource=blob)


def is_content_type(tp: Any) -> bool:
    """Whether a return annotation names a content block, ``Image`` or ``Audio``."""
    if not isinstance(tp, type):
        return False
    return issubclass(tp, (*_BLOCKS, Image, Audio)) or tp.__name__ in _BLOCK_NAMES | {
        "Image",
        "Audio",
    }


def from_pydantic(value: Any, type_: Any) -> Any:
    """A pydantic ``mcp.types`` object as the millimcp struct ``type_``."""
    data = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return msgspec.convert(data, type_)


def _pydantic_block(value: Any) -> ContentBlock | None:
    if type(value).__name__ in _BLOCK_NAMES and hasattr(value, "model_dump"):
        block: ContentBlock = from_pydantic(value, ContentBlock)
        return block
    return None


def to_content(value: Any, compact: bool = False) -> list[ContentBlock]:
    """Content blocks of a tool's return value, as the FastMCP family builds them
    (``compact``: fastmcp's, where a list is one JSON text block)."""
    if value is None:
        return []
    if compact and not isinstance(value, str) and not any(_is_media(i) for i in _items(value)):
        return [TextContent(text=pydantic_core.to_json(value, fallback=str).decode())]
    if isinstance(value, _BLOCKS):
        return [value]
    if isinstance(value, Image) or hasattr(value, "to_image_content"):
        return to_content(value.to_image_content())
    if isinstance(value, Audio) or hasattr(value, "to_audio_content"):
        return to_content(value.to_audio_content())
    if isinstance(value, File) or hasattr(value, "to_resource_content"):
        return to_content(value.to_resource_content())
    block = _pydantic_block(value)
    if block is not None:
        return [block]
    if isinstance(value, list | tuple):
        return [block for item in value for block in to_content(item)]
    if not isinstance(value, str):
        value = pydantic_core.to_json(value, fallback=str, indent=2).decode()
    return [TextContent(text=value)]


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _is_media(value: Any) -> bool:
    return (
        isinstance(value, (*_BLOCKS, _Media))
        or any(hasattr(value, m) for m in _MEDIA_METHODS)
        or _pydantic_block(value) is not None
    )


_MEDIA_METHODS: Final = ("to_image_content", "to_audio_content", "to_resource_content")


def call_result(value: Any) -> CallToolResult | None:
    """``value`` as a ``CallToolResult`` when it is one (millimcp's or ``mcp.types``')."""
    if isinstance(value, CallToolResult):
        return value
    if type(value).__name__ == "CallToolResult" and hasattr(value, "model_dump"):
        result: CallToolResult = from_pydantic(value, CallToolResult)
        return result
    return None


def to_prompt_message(item: Any) -> PromptMessage:
    """One message of a prompt's return: a ``Message``, an ``mcp.types.PromptMessage``, a
    ``{"role", "content"}`` dict, text or a content block (a user message)."""
    if isinstance(item, PromptMessage):
        return item
    if isinstance(item, str):
        return PromptMessage(role="user", content=TextContent(text=item))
    if isinstance(item, dict):
        return msgspec.convert(_dump(item), PromptMessage)
    role = getattr(item, "role", None)
    if role is not None and hasattr(item, "content"):
        content = item.content
        blocks = to_content(content)
        return PromptMessage(role=role, content=blocks[0])
    blocks = to_content(item)
    if len(blocks) != 1:
        raise TypeError(f"a prompt cannot return {type(item).__name__}")
    return PromptMessage(role="user", content=blocks[0])


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value
