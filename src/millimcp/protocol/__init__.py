"""Sans-I/O MCP: envelopes, types, the method table, versions, header rules, request state.

Imports no asyncio, HTTP or torch module (a test proves it).
"""

from millimcp.protocol.headers import McpHeaders, decode_header_value, encode_header_value
from millimcp.protocol.jsonrpc import (
    Message,
    decode_message,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
)
from millimcp.protocol.methods import LEGACY_ONLY, METHODS, MODERN_ONLY, MethodSpec
from millimcp.protocol.request_state import RequestStateSealer, SealedState
from millimcp.protocol.versions import (
    LATEST_VERSION,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    SUPPORTED_VERSIONS,
    is_modern,
    negotiate_legacy,
)

__all__ = [
    "LATEST_VERSION",
    "LEGACY_ONLY",
    "LEGACY_VERSIONS",
    "METHODS",
    "MODERN_ONLY",
    "MODERN_VERSIONS",
    "SUPPORTED_VERSIONS",
    "McpHeaders",
    "Message",
    "MethodSpec",
    "RequestStateSealer",
    "SealedState",
    "decode_header_value",
    "decode_message",
    "encode_error",
    "encode_header_value",
    "encode_notification",
    "encode_request",
    "encode_result",
    "is_modern",
    "negotiate_legacy",
]
