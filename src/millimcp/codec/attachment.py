"""A JSON message with one binary attachment in one body (``dev.millimcp/tensor`` framing).

::

    [8 bytes: N, unsigned little-endian][N bytes: the JSON message][the attachment]

The JSON part is padded with spaces (valid JSON whitespace) so that the attachment starts at
a multiple of 8 bytes: views of it are aligned. Bodies in this framing carry the media type
:data:`ATTACHMENT_MEDIA_TYPE`. This module only moves bytes; what the attachment holds (a
safetensors document of tensors) is the business of ``millimcp.tensor``.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["ATTACHMENT_MEDIA_TYPE", "AttachmentFramingError", "frame", "split"]

ATTACHMENT_MEDIA_TYPE: Final = "application/vnd.millimcp.tensor"
_ALIGN: Final = 8


class AttachmentFramingError(ValueError):
    """A body that claims the attachment framing but does not follow it."""


def frame(message: bytes, attachment: list[Any]) -> list[Any]:
    """The body as a list of buffers: length prefix and padded message, then the attachment."""
    pad = -(8 + len(message)) % _ALIGN
    head = (len(message) + pad).to_bytes(8, "little") + message + b" " * pad
    return [head, *attachment]


def split(body: Any, max_message_bytes: int) -> tuple[bytes, memoryview]:
    """(the JSON message, a view of the attachment) of a framed body; no copy of the attachment.

    Raises :class:`AttachmentFramingError` for a body too short or a length past its end,
    and for a message longer than ``max_message_bytes``.
    """
    view = memoryview(body)
    if len(view) < 8:
        raise AttachmentFramingError("body shorter than its 8-byte message length")
    size = int.from_bytes(view[:8], "little")
    if size > max_message_bytes:
        raise AttachmentFramingError(f"JSON message larger than {max_message_bytes} bytes")
    if 8 + size > len(view):
        raise AttachmentFramingError("message length runs past the end of the body")
    return bytes(view[8 : 8 + size]), view[8 + size :]
