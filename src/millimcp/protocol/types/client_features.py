"""What a server may ask of the client (elicitation, sampling, roots) and the answers.

In the modern era these travel inside an :class:`InputRequiredResult` (MRTR); in the
handshake era as server-to-client requests. The request structs are tagged by ``method``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from millimcp.protocol.types.base import JSONObject, McpStruct, Role
from millimcp.protocol.types.results import Result

__all__ = [
    "CreateMessageParams",
    "CreateMessageRequest",
    "CreateMessageResult",
    "ElicitParams",
    "ElicitRequest",
    "ElicitResult",
    "InputRequest",
    "InputRequiredResult",
    "ListRootsRequest",
    "ListRootsResult",
    "ModelHint",
    "ModelPreferences",
    "Root",
    "SamplingMessage",
]


class ElicitParams(McpStruct, kw_only=True):
    """Form mode carries ``requested_schema``; URL mode carries ``url``."""

    message: str
    mode: Literal["form", "url"] | None = None
    requested_schema: JSONObject | None = None
    url: str | None = None
    elicitation_id: str | None = None


class ElicitRequest(McpStruct, tag_field="method", tag="elicitation/create", kw_only=True):
    params: ElicitParams


class ElicitResult(McpStruct, kw_only=True):
    action: Literal["accept", "decline", "cancel"]
    content: JSONObject | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class SamplingMessage(McpStruct, kw_only=True):
    role: Role
    content: Any
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ModelHint(McpStruct, kw_only=True):
    name: str | None = None


class ModelPreferences(McpStruct, kw_only=True):
    hints: list[ModelHint] | None = None
    cost_priority: float | None = None
    speed_priority: float | None = None
    intelligence_priority: float | None = None


class CreateMessageParams(McpStruct, kw_only=True):
    messages: list[SamplingMessage]
    max_tokens: int
    system_prompt: str | None = None
    model_preferences: ModelPreferences | None = None
    include_context: Literal["none", "thisServer", "allServers"] | None = None
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    metadata: JSONObject | None = None
    tools: list[JSONObject] | None = None
    tool_choice: JSONObject | None = None


class CreateMessageRequest(
    McpStruct, tag_field="method", tag="sampling/createMessage", kw_only=True
):
    params: CreateMessageParams


class CreateMessageResult(McpStruct, kw_only=True):
    role: Role
    content: Any
    model: str
    stop_reason: str | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class Root(McpStruct, kw_only=True):
    uri: str
    name: str | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ListRootsRequest(McpStruct, tag_field="method", tag="roots/list", kw_only=True):
    params: JSONObject | None = None


class ListRootsResult(McpStruct, kw_only=True):
    roots: list[Root]
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


InputRequest: TypeAlias = ElicitRequest | CreateMessageRequest | ListRootsRequest


class InputRequiredResult(Result, tag="input_required", kw_only=True):
    """An interim result: the client answers ``input_requests`` and retries the request."""

    input_requests: dict[str, InputRequest] | None = None
    request_state: str | None = None
