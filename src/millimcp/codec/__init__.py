"""Bytes <-> values. Knows JSON and its framings (SSE, attachments), not MCP."""

from millimcp.codec.attachment import ATTACHMENT_MEDIA_TYPE, AttachmentFramingError
from millimcp.codec.json import (
    DEFAULT_MAX_DEPTH,
    JsonDecodeFailure,
    check_depth,
    decode,
    decoder_for,
    encode,
)
from millimcp.codec.sse import SSE_KEEPALIVE, SseParser, sse_event, sse_priming

__all__ = [
    "ATTACHMENT_MEDIA_TYPE",
    "DEFAULT_MAX_DEPTH",
    "SSE_KEEPALIVE",
    "AttachmentFramingError",
    "JsonDecodeFailure",
    "SseParser",
    "check_depth",
    "decode",
    "decoder_for",
    "encode",
    "sse_event",
    "sse_priming",
]
