"""Bytes <-> values. Knows JSON and its framings (SSE), not MCP."""

from millimcp.codec.json import (
    DEFAULT_MAX_DEPTH,
    JsonDecodeFailure,
    check_depth,
    decode,
    decoder_for,
    encode,
)
from millimcp.codec.sse import SSE_KEEPALIVE, sse_event, sse_priming

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "SSE_KEEPALIVE",
    "JsonDecodeFailure",
    "check_depth",
    "decode",
    "decoder_for",
    "encode",
    "sse_event",
    "sse_priming",
]
