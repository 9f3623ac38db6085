"""Request and reply bodies on aiohttp, for :class:`~millimcp.client.http_link.HttpLink`.

Out: a body with an attachment goes in the ``dev.millimcp/tensor`` framing as a list of
buffers (the tensors written from their own memory, never joined); a large body goes as a
one-buffer list too (aiohttp warns about large ``bytes``). In: a JSON body capped at the
message limit and decoded (``Content-Encoding``) with the same cap; a framed reply read into
one writable buffer whose views back the result tensors.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import aiohttp

from millimcp.client.http_reply import split_framed
from millimcp.client.link import Attachment
from millimcp.codec.attachment import ATTACHMENT_MEDIA_TYPE, frame
from millimcp.codec.compress import decompress
from millimcp.errors import ConnectionLost, FrameTooLarge, TensorFormatError

__all__ = ["LARGE_BODY", "post_data", "read_body", "read_framed"]

LARGE_BODY: Final = 1 << 20
"""Request bodies above this go out as a list of buffers."""


@functools.cache
def _payload_class() -> type[Any]:
    """An aiohttp payload written as a list of buffers, never joined (made on first use)."""
    import aiohttp.payload

    class BufferList(aiohttp.payload.Payload):
        _autoclose = True

        def __init__(self, parts: list[Any], content_type: str) -> None:
            super().__init__(parts, content_type=content_type)
            self._size = sum(len(p) for p in parts)

        def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
            return b"".join(self._value).decode(encoding, errors)

        async def write(self, writer: Any) -> None:
            for part in self._value:
                await writer.write(part)

        async def write_with_length(self, writer: Any, content_length: int | None) -> None:
            await self.write(writer)

    return BufferList


def post_data(body: bytes, attachment: Attachment | None) -> tuple[Any, str | None]:
    """What to POST for ``body`` and its Content-Type (None: the session's JSON default)."""
    if attachment is not None:
        parts = frame(body, list(attachment))
        return _payload_class()(parts, ATTACHMENT_MEDIA_TYPE), ATTACHMENT_MEDIA_TYPE
    if len(body) > LARGE_BODY:
        return _payload_class()([body], "application/json"), None
    return body, None


async def read_body(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """A whole (JSON) body, decoded; :class:`~millimcp.errors.FrameTooLarge` past ``limit``
    bytes, before or after decoding."""
    length = response.content_length
    if length is not None and length > limit:
        raise FrameTooLarge(limit)
    if length is not None:
        data = await response.read()
    else:
        chunks = []
        size = 0
        async for chunk in response.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise FrameTooLarge(limit)
            chunks.append(chunk)
        data = b"".join(chunks)
    coding = response.headers.get("Content-Encoding")
    if coding is not None:
        data = decompress(data, coding, limit)
    return data


async def read_framed(
    response: aiohttp.ClientResponse, max_message_bytes: int, max_bytes: int
) -> tuple[bytes, memoryview]:
    """A framed reply read into one writable buffer: its JSON part and its attachment."""
    coding = response.headers.get("Content-Encoding")
    if coding is not None and coding.strip().lower() != "identity":
        raise TensorFormatError(f"a reply with an attachment came with Content-Encoding {coding}")
    length = response.content_length
    if length is not None:
        if length > max_bytes:
            raise FrameTooLarge(max_bytes)
        buffer = bytearray(length)
        view = memoryview(buffer)
        filled = 0
        async for chunk in response.content.iter_any():
            end = filled + len(chunk)
            if end > length:
                raise ConnectionLost("the reply ran past its Content-Length")
            view[filled:end] = chunk
            filled = end
        if filled != length:
            raise ConnectionLost("the reply ended before its Content-Length")
    else:
        buffer = bytearray()
        async for chunk in response.content.iter_any():
            buffer += chunk
            if len(buffer) > max_bytes:
                raise FrameTooLarge(max_bytes)
    return split_framed(buffer, max_message_bytes)
