"""Resource entries: static URIs and RFC 6570 templates, and how a read runs."""

from __future__ import annotations

import base64
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from millimcp.codec import encode
from millimcp.errors import ConfigurationError
from millimcp.protocol.types import (
    BlobResourceContents,
    CacheScope,
    Icon,
    Resource,
    ResourceContents,
    ResourceTemplate,
    TextResourceContents,
)
from millimcp.server.invoke import Invoker, context_parameter
from millimcp.server.offload import Pools
from millimcp.server.uri_template import UriTemplate
from millimcp.session import Context

__all__ = ["ResourceEntry", "resolve", "to_contents"]


class ResourceEntry:
    """A static resource (``template is None``) or a resource template."""

    __slots__ = (
        "cache_scope",
        "definition",
        "fn",
        "invoke",
        "mime_type",
        "parameters",
        "scopes",
        "template",
        "ttl_ms",
        "uri",
    )

    def __init__(
        self,
        uri: str,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        ttl_ms: int = 0,
        cache_scope: CacheScope = "private",
        meta: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        scopes: Sequence[str] = (),
    ) -> None:
        self.uri = uri
        self.fn = fn
        self.scopes: tuple[str, ...] = tuple(scopes)
        """OAuth scopes a token needs to read it (``Server(auth=...)``), besides the required."""
        self.mime_type = mime_type
        self.ttl_ms = ttl_ms
        self.cache_scope: CacheScope = cache_scope
        self.template = UriTemplate(uri) if "{" in uri else None
        context_param = context_parameter(fn)
        self.invoke = Invoker(fn, context_param=context_param)
        self.parameters = frozenset(inspect.signature(fn).parameters) - {context_param}
        """The URI variables the function takes."""
        given = set(self.template.variables) if self.template is not None else set()
        if not self.parameters <= given:
            raise ConfigurationError(
                f"resource {uri!r}: parameters {sorted(self.parameters - given)} are not in the URI"
            )
        name = name or fn.__name__
        description = inspect.getdoc(fn) if description is None else description
        self.definition: Resource | ResourceTemplate
        if self.template is None:
            self.definition = Resource(
                uri=uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                meta=meta,
                icons=msgspec.convert(icons, list[Icon]) if icons else None,
            )
        else:
            self.definition = ResourceTemplate(
                uri_template=uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                meta=meta,
                icons=msgspec.convert(icons, list[Icon]) if icons else None,
            )

    def __repr__(self) -> str:
        return f"<Resource {self.uri}>"

    async def read(
        self, uri: str, variables: dict[str, str], ctx: Context, pools: Pools
    ) -> list[ResourceContents]:
        """Run the function with the URI's ``variables`` and convert what it returned."""
        kwargs: dict[str, Any] = {k: v for k, v in variables.items() if k in self.parameters}
        value = await self.invoke(kwargs, ctx, pools)
        return to_contents(uri, value, self.mime_type)


def resolve(
    resources: Mapping[str, ResourceEntry], templates: Mapping[str, ResourceEntry], uri: str
) -> tuple[ResourceEntry, dict[str, str]] | None:
    """The entry that serves ``uri`` and its variables: the static resource, else the first
    template (in registration order) that matches; None when nothing does."""
    entry = resources.get(uri)
    if entry is not None:
        return entry, {}
    for template in templates.values():
        assert template.template is not None
        variables = template.template.match(uri)
        if variables is not None:
            return template, variables
    return None


def to_contents(uri: str, value: Any, mime_type: str | None) -> list[ResourceContents]:
    """Turn what a resource function returned into resource contents."""
    if isinstance(value, str):
        return [TextResourceContents(uri=uri, text=value, mime_type=mime_type or "text/plain")]
    if isinstance(value, bytes | bytearray | memoryview):
        return [
            BlobResourceContents(
                uri=uri,
                blob=base64.b64encode(value).decode("ascii"),
                mime_type=mime_type or "application/octet-stream",
            )
        ]
    if isinstance(value, TextResourceContents | BlobResourceContents):
        return [value]
    if isinstance(value, list) and all(
        isinstance(v, TextResourceContents | BlobResourceContents) for v in value
    ):
        return value
    text = encode(msgspec.to_builtins(value)).decode()
    return [TextResourceContents(uri=uri, text=text, mime_type=mime_type or "application/json")]
