"""PrefectHQ's ``fastmcp`` on millimcp, the subset real servers use: change
``from fastmcp import FastMCP`` to ``from millimcp.compat.fastmcp import FastMCP``.

Bare ``@mcp.tool``, ``@mcp.tool("name")`` and ``mcp.tool(fn, name=...)``; ``tags``,
``output_schema``, ``timeout``; the docstring's ``Args:`` as parameter descriptions;
``Image``/``Audio``/``File``; ``get_context()``; ``run(transport="http", host=, port=, path=)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, overload

from millimcp.compat.app import CompatServer
from millimcp.compat.context import Context, ElicitationResult, ReadResourceContents, get_context
from millimcp.compat.errors import PromptError, ResourceError, ToolError
from millimcp.compat.flavour import FASTMCP
from millimcp.compat.messages import AssistantMessage, Message, UserMessage
from millimcp.compat.results import Audio, File, Image

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "AssistantMessage",
    "Audio",
    "Context",
    "ElicitationResult",
    "FastMCP",
    "File",
    "Image",
    "Message",
    "PromptError",
    "ReadResourceContents",
    "ResourceError",
    "ToolError",
    "UserMessage",
    "get_context",
]


class FastMCP(CompatServer):
    """``fastmcp.FastMCP``, served by millimcp."""

    flavour = FASTMCP

    def __init__(
        self,
        name: str | None = None,
        instructions: str | None = None,
        *,
        version: str | None = None,
        website_url: str | None = None,
        icons: list[Any] | None = None,
        lifespan: Callable[[Any], contextlib.AbstractAsyncContextManager[Any]] | None = None,
        tools: list[Any] | None = None,
        mask_error_details: bool = False,
        **_: Any,
    ) -> None:
        if mask_error_details:
            self.flavour = dataclasses.replace(FASTMCP, crash_error="Error calling tool {name!r}")
        super().__init__(
            name, instructions, version=version, website_url=website_url, lifespan=lifespan
        )
        for fn in tools or ():
            self.add_tool(fn)

    @overload  # type: ignore[override]
    def tool(self, name_or_fn: F, /, **options: Any) -> F: ...

    @overload
    def tool(self, name_or_fn: str | None = None, /, **options: Any) -> Callable[[F], F]: ...

    def tool(
        self,
        name_or_fn: Any = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        tags: set[str] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: Any = None,
        icons: list[Any] | None = None,
        meta: dict[str, Any] | None = None,
        timeout: float | None = None,
        **_: Any,
    ) -> Any:
        """``@mcp.tool``, ``@mcp.tool("name")``, ``@mcp.tool(name=...)`` or
        ``mcp.tool(fn, ...)``; returns the function."""
        if isinstance(name_or_fn, str):
            name = name_or_fn

        def register(fn: Any) -> Any:
            self.add_tool(
                fn,
                name,
                title,
                description,
                annotations,
                icons,
                meta,
                output_schema=output_schema,
                timeout=timeout,
                tags=tags,
            )
            return fn

        return register(name_or_fn) if callable(name_or_fn) else register

    @overload  # type: ignore[override]
    def prompt(self, name_or_fn: F, /, **options: Any) -> F: ...

    @overload
    def prompt(self, name_or_fn: str | None = None, /, **options: Any) -> Callable[[F], F]: ...

    def prompt(self, name_or_fn: Any = None, /, *, name: str | None = None, **options: Any) -> Any:
        """``@mcp.prompt``, ``@mcp.prompt("name")`` or ``@mcp.prompt(name=...)``."""
        if isinstance(name_or_fn, str):
            name = name_or_fn

        def register(fn: Any) -> Any:
            self.add_prompt(
                fn, name, options.get("title"), options.get("description"), options.get("tags")
            )
            return fn

        return register(name_or_fn) if callable(name_or_fn) else register

    def run(self, transport: str | None = None, **options: Any) -> None:  # type: ignore[override]
        options.pop("show_banner", None)
        super().run(transport or "stdio", **options)
