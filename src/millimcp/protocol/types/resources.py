"""Resources: listing, templates, reading, update notifications."""

from __future__ import annotations

import msgspec

from millimcp.protocol.types.base import (
    Annotations,
    Icon,
    JSONObject,
    McpStruct,
    PaginatedParams,
    RequestMeta,
)
from millimcp.protocol.types.content import ResourceContents
from millimcp.protocol.types.results import CacheableResult

__all__ = [
    "ListResourceTemplatesResult",
    "ListResourcesResult",
    "ReadResourceParams",
    "ReadResourceResult",
    "Resource",
    "ResourceTemplate",
    "ResourceUpdatedParams",
]


class Resource(McpStruct, kw_only=True):
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Annotations | None = None
    icons: list[Icon] | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ResourceTemplate(McpStruct, kw_only=True):
    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: Annotations | None = None
    icons: list[Icon] | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class ListResourcesResult(CacheableResult, kw_only=True):
    resources: list[Resource]
    next_cursor: str | None = None


class ListResourceTemplatesResult(CacheableResult, kw_only=True):
    resource_templates: list[ResourceTemplate]
    next_cursor: str | None = None


class ListResourcesParams(PaginatedParams, kw_only=True):
    pass


class ReadResourceParams(McpStruct, kw_only=True):
    uri: str
    meta: RequestMeta | None = msgspec.field(default=None, name="_meta")
    input_responses: dict[str, msgspec.Raw] | None = None
    request_state: str | None = None


class ReadResourceResult(CacheableResult, kw_only=True):
    contents: list[ResourceContents]


class ResourceUpdatedParams(McpStruct, kw_only=True):
    uri: str
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")
