"""``CompatServer``: the FastMCP-family server object over a millimcp ``Server``.

The three flavours' classes (``FastMCP`` of mcp 1.x and of fastmcp, ``MCPServer`` of mcp
2.x) subclass it and differ only in their constructors, their ``Flavour`` and the details
of ``tool()``. Registration goes through :mod:`millimcp.compat.adapter`; serving through
:mod:`millimcp.compat.running`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from millimcp.compat.adapter import (
    ToolSpec,
    copy_context_call,
    fastmcp_meta,
    plain,
    prompt_handler,
    resource_handler,
    tool_options,
)
from millimcp.compat.flavour import Flavour
from millimcp.compat.middleware import Middleware, MiddlewareServer
from millimcp.compat.running import Runner, Settings
from millimcp.compat.signature import docstring
from millimcp.errors import InvalidParams
from millimcp.protocol.types import ResourceContents, Tool
from millimcp.server import Server
from millimcp.session import Context as CoreContext

__all__ = ["CompatServer"]

F = TypeVar("F", bound=Callable[..., Any])


class CompatServer(Runner):
    """What the three APIs share: decorators, ``add_*``/``remove_*``, ``run()``, apps."""

    flavour: Flavour

    def __init__(
        self,
        name: str | None = None,
        instructions: str | None = None,
        *,
        version: str | None = None,
        title: str | None = None,
        website_url: str | None = None,
        lifespan: Callable[[Any], contextlib.AbstractAsyncContextManager[Any]] | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.name = name or self.flavour.default_name
        self.settings = settings or Settings()
        self._user_lifespan = lifespan
        self.server: MiddlewareServer = MiddlewareServer(
            self.name,
            version or "0.0.0",
            instructions,
            title=title,
            website_url=website_url,
            lifespan=self._lifespan,
        )
        """The millimcp server everything is registered on (``.asgi()``, ``.config``...)."""
        self._routes: list[Any] = []

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} on {self.server!r}>"

    @property
    def instructions(self) -> str | None:
        return self.server.instructions

    @property
    def middleware(self) -> list[Middleware]:
        """``(ctx, call_next)`` middleware around every request, outermost first (2.x)."""
        return self.server.middleware

    async def list_tools(self) -> list[Tool]:
        """The tools' definitions, as ``tools/list`` gives them (each has ``.name``)."""
        return [entry.definition for entry in self.server._tool_registry]

    @contextlib.asynccontextmanager
    async def _lifespan(self, _: Server) -> AsyncIterator[Any]:
        if self._user_lifespan is None:
            yield {}
            return
        async with self._user_lifespan(self) as value:
            yield value

    # -- tools ------------------------------------------------------------------------------

    def add_tool(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Any = None,
        icons: list[Any] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
        *,
        output_schema: dict[str, Any] | None = None,
        timeout: float | None = None,
        tags: set[str] | None = None,
    ) -> ToolSpec:
        """Register ``fn`` as a tool (the SDK's ``add_tool``)."""
        spec = ToolSpec(
            self,
            fn,
            name=name,
            description=description,
            structured_output=structured_output,
            output_schema=output_schema,
        )
        options = tool_options(
            spec,
            title=title,
            annotations=annotations,
            icons=icons,
            meta=meta,
            timeout=timeout,
            tags=tags,
        )

        async def call(arguments: dict[str, Any], mctx: CoreContext) -> Any:
            return await spec(arguments, mctx)

        self.server._add_tool(call, options)
        return spec

    def tool(
        self,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Any = None,
        icons: list[Any] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> Callable[[F], F]:
        """``@server.tool(...)``: register the function, return it unchanged."""
        if callable(name):
            raise TypeError(
                "The @tool decorator was used incorrectly. Did you forget to call it? "
                "Use @tool() instead of @tool"
            )

        def register(fn: F) -> F:
            self.add_tool(fn, name, title, description, annotations, icons, meta, structured_output)
            return fn

        return register

    def remove_tool(self, name: str) -> None:
        self.server.remove_tool(name)

    # -- resources and prompts --------------------------------------------------------------

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        tags: set[str] | None = None,
        icons: list[Any] | None = None,
        **_: Any,
    ) -> Callable[[F], F]:
        """``@server.resource(uri)``: a template when the URI has ``{variables}``."""
        if callable(uri):
            raise TypeError(
                "The @resource decorator was used incorrectly. Did you forget to call it? "
                "Use @resource('uri') instead of @resource"
            )

        def register(fn: F) -> F:
            handler = resource_handler(self, fn)
            fastmcp = self.flavour.fastmcp_meta
            self.server.resource(
                uri,
                name=name or fn.__name__,
                title=title,
                description=self._description(fn, description),
                mime_type=mime_type or "text/plain",
                meta=fastmcp_meta(None, tags) if fastmcp else None,
                icons=[plain(icon) for icon in icons] if icons else None,
            )(handler)
            return fn

        return register

    def prompt(
        self,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[Any] | None = None,
        **_: Any,
    ) -> Callable[[F], F]:
        """``@server.prompt(...)``: the function's parameters are the prompt's arguments."""
        if callable(name):
            raise TypeError(
                "The @prompt decorator was used incorrectly. Did you forget to call it? "
                "Use @prompt() instead of @prompt"
            )

        def register(fn: F) -> F:
            self.add_prompt(fn, name, title, description, icons=icons)
            return fn

        return register

    def add_prompt(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        tags: set[str] | None = None,
        icons: list[Any] | None = None,
    ) -> None:
        handler, descriptions = prompt_handler(self, fn)
        fastmcp = self.flavour.fastmcp_meta
        self.server.prompt(
            name or fn.__name__,
            title=title,
            description=self._description(fn, description),
            argument_descriptions=descriptions,
            meta=fastmcp_meta(None, tags) if fastmcp else None,
            icons=[plain(icon) for icon in icons] if icons else None,
        )(handler)

    def _description(self, fn: Callable[..., Any], given: str | None) -> str | None:
        if given:
            return given
        if self.flavour.docstring_args:
            return docstring(fn.__doc__)[0]
        return fn.__doc__ or ""

    def completion(self) -> Callable[[F], F]:
        """``@server.completion()``: the handler ``(ref, argument, context)``."""
        return self.server.completion()

    # -- in-process use ---------------------------------------------------------------------

    async def read_resource_contents(self, uri: str, ctx: CoreContext) -> list[ResourceContents]:
        """Read ``uri`` from this server's own resources (``ctx.read_resource``)."""
        server = self.server
        entry = server._resource_registry.entries.get(uri)
        variables: dict[str, str] | None = {}
        if entry is None:
            for candidate in server._template_registry.entries.values():
                assert candidate.template is not None
                variables = candidate.template.match(uri)
                if variables is not None:
                    entry = candidate
                    break
        if entry is None or variables is None:
            raise InvalidParams(f"Unknown resource: {uri}")
        return await entry.read(uri, variables, ctx, server._pools)

    async def run_sync(self, call: Callable[[], Any]) -> Any:
        """Run a sync user function on the server's thread pool, context variables kept."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.server.executor, copy_context_call(call))
