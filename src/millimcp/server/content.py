"""Helpers that build content blocks: ``text``, ``image``, ``audio``, ``embedded``, ``link``."""

from __future__ import annotations

import base64

from millimcp.protocol.types import (
    Annotations,
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

__all__ = ["audio", "embedded", "image", "link", "text"]


def text(value: str, *, annotations: Annotations | None = None) -> TextContent:
    return TextContent(text=value, annotations=annotations)


def image(data: bytes | str, mime_type: str = "image/png") -> ImageContent:
    """An image; ``data`` is raw bytes, or a str already in base64."""
    return ImageContent(data=_b64(data), mime_type=mime_type)


def audio(data: bytes | str, mime_type: str = "audio/wav") -> AudioContent:
    """Audio; ``data`` is raw bytes, or a str already in base64."""
    return AudioContent(data=_b64(data), mime_type=mime_type)


def embedded(
    uri: str,
    *,
    text: str | None = None,
    blob: bytes | None = None,
    mime_type: str | None = None,
) -> EmbeddedResource:
    """An embedded resource with either ``text`` or ``blob`` (raw bytes) contents."""
    if (text is None) == (blob is None):
        raise ValueError("give exactly one of text= or blob=")
    if text is not None:
        return EmbeddedResource(
            resource=TextResourceContents(uri=uri, text=text, mime_type=mime_type)
        )
    assert blob is not None
    return EmbeddedResource(
        resource=BlobResourceContents(uri=uri, blob=_b64(blob), mime_type=mime_type)
    )


def link(
    uri: str, name: str, *, description: str | None = None, mime_type: str | None = None
) -> ResourceLink:
    return ResourceLink(uri=uri, name=name, description=description, mime_type=mime_type)


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")
