"""Shared building blocks: the struct base, identities, capabilities, request ``_meta``."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

__all__ = [
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_PROTOCOL_VERSION",
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
    "Annotations",
    "ClientCapabilities",
    "Icon",
    "Implementation",
    "JSONObject",
    "LoggingLevel",
    "McpStruct",
    "PaginatedParams",
    "ProgressToken",
    "RequestId",
    "RequestMeta",
    "RequestParams",
    "Role",
    "ServerCapabilities",
]

RequestId: TypeAlias = int | str
ProgressToken: TypeAlias = int | str
JSONObject: TypeAlias = dict[str, Any]
Role: TypeAlias = Literal["user", "assistant"]
LoggingLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


class McpStruct(msgspec.Struct, omit_defaults=True, rename="camel", kw_only=True):
    """Base of every MCP type: camelCase on the wire, unset optionals omitted."""


class Icon(McpStruct, kw_only=True):
    src: str
    mime_type: str | None = None
    sizes: list[str] | None = None
    theme: Literal["light", "dark"] | None = None


class Implementation(McpStruct, kw_only=True, gc=False):
    name: str
    version: str
    title: str | None = None
    description: str | None = None
    website_url: str | None = None
    icons: list[Icon] | None = None


class Annotations(McpStruct, kw_only=True):
    audience: list[Role] | None = None
    priority: float | None = None
    last_modified: str | None = None


class ClientCapabilities(McpStruct, kw_only=True, gc=False):
    elicitation: JSONObject | None = None
    sampling: JSONObject | None = None
    roots: JSONObject | None = None
    experimental: JSONObject | None = None
    extensions: JSONObject | None = None


class ServerCapabilities(McpStruct, kw_only=True):
    tools: JSONObject | None = None
    resources: JSONObject | None = None
    prompts: JSONObject | None = None
    completions: JSONObject | None = None
    logging: JSONObject | None = None
    experimental: JSONObject | None = None
    extensions: JSONObject | None = None


class RequestMeta(McpStruct, kw_only=True, gc=False):
    """The request ``_meta``: per-request protocol fields (modern era) and reserved keys.

    ``gc=False`` here and on the structs it holds: decoded with every request, never part of a
    reference cycle, so the collector need not track them.

    The modern era requires ``protocol_version`` and ``client_capabilities``; they are
    optional here so that one type serves both eras, and the modern path checks them.
    """

    protocol_version: str | None = msgspec.field(default=None, name=META_PROTOCOL_VERSION)
    client_capabilities: ClientCapabilities | None = msgspec.field(
        default=None, name=META_CLIENT_CAPABILITIES
    )
    client_info: Implementation | None = msgspec.field(default=None, name=META_CLIENT_INFO)
    log_level: LoggingLevel | None = msgspec.field(default=None, name=META_LOG_LEVEL)
    progress_token: ProgressToken | None = msgspec.field(default=None, name="progressToken")
    traceparent: str | None = None
    tracestate: str | None = None
    baggage: str | None = None


class RequestParams(McpStruct, kw_only=True):
    """Params of a request that carries nothing but ``_meta``."""

    meta: RequestMeta | None = msgspec.field(default=None, name="_meta")


class PaginatedParams(RequestParams, kw_only=True):
    cursor: str | None = None
