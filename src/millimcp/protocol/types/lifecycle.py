"""Discovery, subscriptions and the notifications a server sends."""

from __future__ import annotations

from typing import Any

import msgspec

from millimcp.protocol.types.base import (
    JSONObject,
    LoggingLevel,
    McpStruct,
    ProgressToken,
    RequestId,
    RequestMeta,
    ServerCapabilities,
)
from millimcp.protocol.types.results import CacheableResult, Result

__all__ = [
    "CancelledParams",
    "DiscoverResult",
    "ListenParams",
    "ListenResult",
    "LoggingMessageParams",
    "ProgressParams",
    "SubscriptionFilter",
    "SubscriptionsAcknowledgedParams",
]


class DiscoverResult(CacheableResult, kw_only=True):
    supported_versions: list[str]
    capabilities: ServerCapabilities
    instructions: str | None = None


class SubscriptionFilter(McpStruct, kw_only=True):
    tools_list_changed: bool | None = None
    prompts_list_changed: bool | None = None
    resources_list_changed: bool | None = None
    resource_subscriptions: list[str] | None = None
    task_ids: list[str] | None = None
    """``notifications/tasks`` for these tasks (the tasks extension)."""


class ListenParams(McpStruct, kw_only=True):
    notifications: SubscriptionFilter
    meta: RequestMeta | None = msgspec.field(default=None, name="_meta")


class ListenResult(Result, kw_only=True):
    pass


class SubscriptionsAcknowledgedParams(McpStruct, kw_only=True):
    notifications: SubscriptionFilter
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ProgressParams(McpStruct, kw_only=True):
    progress_token: ProgressToken
    progress: float
    total: float | None = None
    message: str | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class LoggingMessageParams(McpStruct, kw_only=True):
    level: LoggingLevel
    data: Any
    logger: str | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class CancelledParams(McpStruct, kw_only=True):
    request_id: RequestId | None = None
    reason: str | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")
