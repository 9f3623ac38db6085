"""The handshake era (2025-11-25 and earlier): ``initialize``, sessions' own requests.

These messages exist only in the legacy revisions. Their results carry no ``resultType``:
the handshake era does not know it.
"""

from __future__ import annotations

import msgspec

from millimcp.protocol.types.base import (
    ClientCapabilities,
    Implementation,
    JSONObject,
    LoggingLevel,
    McpStruct,
    RequestParams,
    ServerCapabilities,
)

__all__ = [
    "InitializeParams",
    "InitializeResult",
    "LegacyEmptyResult",
    "SetLevelParams",
    "SubscribeParams",
]


class InitializeParams(RequestParams, kw_only=True):
    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation


class InitializeResult(McpStruct, kw_only=True):
    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class LegacyEmptyResult(McpStruct, kw_only=True):
    """``{}``: the answer to ``ping``, ``logging/setLevel`` and ``resources/(un)subscribe``."""

    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class SetLevelParams(RequestParams, kw_only=True):
    level: LoggingLevel


class SubscribeParams(RequestParams, kw_only=True):
    uri: str
