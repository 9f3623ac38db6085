"""The application API: ``Server``, a facade over registries, method handlers, notifications
and pools.

``@server.tool``, ``@server.resource(uri)``, ``@server.prompt`` and ``@server.completion``
register; ``asgi()``, ``run_http()``, ``run_stdio()`` and ``serve_stdio()`` serve; ``running()``
is the lifespan. What answers each MCP method is in :mod:`millimcp.server.methods`, the lists
and their pages in :mod:`millimcp.server.registry`, change notifications in
:mod:`millimcp.server.notify`, how a function runs in :mod:`millimcp.server.invoke`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import os
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from millimcp.auth.resource import ProtectedResource
from millimcp.auth.scopes import union_scopes
from millimcp.cache import Cache, CacheStore
from millimcp.protocol import RequestStateSealer
from millimcp.protocol.types import (
    CacheScope,
    Implementation,
    InputRequest,
    ServerCapabilities,
    ToolAnnotations,
)
from millimcp.resilience import ConcurrencyLimit, InFlightLimiter
from millimcp.server.config import ServerConfig
from millimcp.server.methods import Methods
from millimcp.server.notify import Notifier
from millimcp.server.offload import Pools
from millimcp.server.options import ToolOptions
from millimcp.server.prompts import PromptEntry
from millimcp.server.registry import Registry
from millimcp.server.resources import ResourceEntry, resolve
from millimcp.server.tools import ToolEntry
from millimcp.session import HttpEndpoint, Mrtr, RequestHandler, Router
from millimcp.tasks import TaskManager, TaskMode
from millimcp.transports.http import HttpConfig, StreamableHTTPApp
from millimcp.transports.stdio import StdioConfig

if TYPE_CHECKING:
    from millimcp.transports.auth_core import AuthCore

__all__ = ["Server"]

F = TypeVar("F", bound=Callable[..., Any])
Lifespan = Callable[["Server"], contextlib.AbstractAsyncContextManager[Any]]
"""``lifespan(server)``: an async context manager around the server's life; what it yields
reaches every handler as ``ctx.lifespan``."""


class _Unset(enum.Enum):
    PATH = "path"

    def __repr__(self) -> str:
        return "<http.path, else '/mcp'>"


class Server:
    """An MCP server: register tools, resources and prompts, then serve ``asgi()``.

    ``lifespan(server)`` runs around the server's life (``running()``): what it yields is
    ``ctx.lifespan`` in every tool, resource, prompt and completion handler.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.0.0",
        instructions: str | None = None,
        *,
        title: str | None = None,
        website_url: str | None = None,
        config: ServerConfig | None = None,
        lifespan: Lifespan | None = None,
        auth: ProtectedResource | None = None,
    ) -> None:
        self.config = config or ServerConfig()
        self.auth = auth
        """The endpoint is a protected resource (``docs/auth.md``): HTTP requests need a
        bearer token its verifier accepts; stdio stays credential-free."""
        self._lifespan = lifespan
        self._notifier = Notifier(self.config.listener_queue)
        page_size = self.config.page_size
        self._gates: weakref.WeakSet[AuthCore] = weakref.WeakSet()
        """The auth rules of this server's apps (each app's gate holds one, and the native
        front that serves it), told when a tool, prompt or resource is added or removed;
        held weakly, so an app dropped takes its rules with it."""

        def changed(kind: str) -> None:
            self._notifier.list_changed(kind)
            for gate in list(self._gates):
                gate.forget_scopes()

        self._tool_registry = Registry[ToolEntry]("tools", page_size, changed)
        self._prompt_registry = Registry[PromptEntry]("prompts", page_size, changed)
        self._resource_registry = Registry[ResourceEntry]("resources", page_size, changed)
        self._template_registry = Registry[ResourceEntry]("templates", page_size, changed)
        self._registries: dict[str, Registry[Any]] = {
            registry.kind: registry
            for registry in (
                self._tool_registry,
                self._prompt_registry,
                self._resource_registry,
                self._template_registry,
            )
        }
        self._pools = Pools(self.config.sync_workers, self.config.process_workers)
        self._methods = Methods(
            Implementation(name=name, version=version, title=title, website_url=website_url),
            instructions,
            self.config,
            tools=self._tool_registry,
            prompts=self._prompt_registry,
            resources=self._resource_registry,
            templates=self._template_registry,
            notifier=self._notifier,
            pools=self._pools,
        )
        self._endpoints: list[HttpEndpoint] = []
        self._cache: CacheStore | None = None
        key = self.config.state_key
        if key is None:
            env = os.environ.get("MILLIMCP_STATE_KEY")
            key = bytes.fromhex(env) if env else os.urandom(32)
        self.sealer = RequestStateSealer(key, ttl=self.config.state_ttl_s)

    def __repr__(self) -> str:
        return (
            f"<Server {self.info.name!r} tools={len(self._tool_registry)} "
            f"resources={len(self._resource_registry) + len(self._template_registry)} "
            f"prompts={len(self._prompt_registry)} listeners={len(self._notifier)}>"
        )

    @property
    def info(self) -> Implementation:
        """The ``serverInfo`` this server sends."""
        return self._methods.info

    @info.setter
    def info(self, value: Implementation) -> None:
        self._methods.info = value

    @property
    def instructions(self) -> str | None:
        """The ``instructions`` of ``server/discover`` and ``initialize``."""
        return self._methods.instructions

    @instructions.setter
    def instructions(self, value: str | None) -> None:
        self._methods.instructions = value

    # -- registration ---------------------------------------------------------------------

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | dict[str, Any] | None = None,
        timeout: float | None = None,
        structured: bool | None = None,
        text_mirror: bool = True,
        meta: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        input_schema: dict[str, Any] | None = None,
        cache: Cache | None = None,
        invalidates: Sequence[str] = (),
        concurrency: ConcurrencyLimit | None = None,
        executor: Literal["thread", "process"] = "thread",
        scopes: Sequence[str] = (),
        task: TaskMode | None = None,
        ask_first: dict[str, InputRequest] | None = None,
    ) -> Callable[[F], F]: ...

    def tool(self, name: Any = None, **options: Any) -> Any:
        """Register a tool: ``@server.tool``, ``server.tool(fn)``, ``@server.tool("name")`` or
        ``@server.tool(name=..., **options)``; returns the function itself.

        Its input schema comes from the type hints of its parameters. A typed return (struct,
        dataclass, TypedDict, pydantic model, dict/list/number) gives an ``outputSchema`` and
        ``structuredContent``; a ``str`` return is text; content blocks are sent as they are.
        Sync functions run on the server's thread pool. The keywords are the fields of
        :class:`~millimcp.server.options.ToolOptions` (what each does is documented there);
        ``timeout=None`` takes ``ServerConfig.tool_timeout_s``.
        """
        if callable(name):
            return self._add_tool(name, ToolOptions(**options))
        tool_options = ToolOptions(name=name, **options)

        def register(fn: F) -> F:
            return self._add_tool(fn, tool_options)

        return register

    def _add_tool(self, fn: F, options: ToolOptions) -> F:
        if options.timeout is None and self.config.tool_timeout_s is not None:
            options = dataclasses.replace(options, timeout=self.config.tool_timeout_s)
        if options.task is None and self.config.tasks.default != "never":
            options = dataclasses.replace(options, task=self.config.tasks.default)
        needs_store = options.cache is not None or bool(options.invalidates)
        entry = ToolEntry(fn, options, store=self.cache if needs_store else None)
        self._tool_registry.add(entry.name, entry)
        return fn

    def remove_tool(self, name: str) -> None:
        """Unregister a tool (``KeyError`` when there is none) and announce the change."""
        self._tool_registry.remove(name)

    def resource(
        self,
        uri: str,
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
    ) -> Callable[[F], F]:
        """Register a resource, or a template when ``uri`` has ``{variables}``.

        Returning ``str`` gives text contents, ``bytes`` a base64 blob; a template's
        function takes its variables as parameters. Registering ``uri`` again replaces it.
        ``meta`` is the definition's ``_meta``, ``icons`` its icons (wire dicts). ``scopes``:
        OAuth scopes a token needs to read (or subscribe to) it, besides
        ``ProtectedResource.required_scopes`` (``Server(auth=...)``; else 403).
        """

        def register(fn: F) -> F:
            entry = ResourceEntry(
                uri,
                fn,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                ttl_ms=ttl_ms,
                cache_scope=cache_scope,
                meta=meta,
                icons=icons,
                scopes=scopes,
            )
            registry = (
                self._resource_registry if entry.template is None else self._template_registry
            )
            registry.add(uri, entry)
            return fn

        return register

    def remove_resource(self, uri: str) -> None:
        """Unregister a resource or a template by its ``uri`` (``KeyError`` when there is
        none) and announce the change."""
        if uri in self._resource_registry:
            self._resource_registry.remove(uri)
        else:
            self._template_registry.remove(uri)

    @overload
    def prompt(self, fn: F, /) -> F: ...

    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        argument_descriptions: dict[str, str] | None = None,
        meta: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        name: Any = None,
        *,
        title: str | None = None,
        description: str | None = None,
        argument_descriptions: dict[str, str] | None = None,
        meta: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        scopes: Sequence[str] = (),
    ) -> Any:
        """Register a prompt: ``@server.prompt``, ``server.prompt(fn)``,
        ``@server.prompt("name")`` or ``@server.prompt(name=..., ...)``; its parameters are
        its (string) arguments, a parameter annotated ``Context`` gets the request's context.
        ``scopes``: OAuth scopes a token needs to get it (``Server(auth=...)``; else 403).
        """

        def register(fn: F) -> F:
            entry = PromptEntry(
                fn,
                name=None if callable(name) else name,
                title=title,
                description=description,
                argument_descriptions=argument_descriptions,
                meta=meta,
                icons=icons,
                scopes=scopes,
            )
            self._prompt_registry.add(entry.name, entry)
            return fn

        return register(name) if callable(name) else register

    def remove_prompt(self, name: str) -> None:
        """Unregister a prompt (``KeyError`` when there is none) and announce the change."""
        self._prompt_registry.remove(name)

    @overload
    def completion(self, fn: F, /) -> F: ...

    @overload
    def completion(self) -> Callable[[F], F]: ...

    def completion(self, fn: Any = None) -> Any:
        """Register the completion handler: ``fn(ref, argument, context) -> list[str]``, as
        ``@server.completion``, ``@server.completion()`` or ``server.completion(fn)``.

        ``ref`` is a :class:`~millimcp.protocol.types.CompletionRef`, ``argument`` a
        :class:`~millimcp.protocol.types.CompleteArgument`, ``context`` a dict of the other
        arguments already filled in; a further parameter annotated ``Context`` gets the
        request's context. It may be sync or async and may return a ``Completion``.
        """

        def register(completer: F) -> F:
            self._methods.set_completer(completer)
            return completer

        return register if fn is None else register(fn)

    # -- notifications ----------------------------------------------------------------------

    def notify_resource_updated(self, uri: str) -> None:
        """Tell every stream and session subscribed to ``uri`` that it changed."""
        self._notifier.resource_updated(uri)

    def notify_list_changed(self, kind: str) -> None:
        """Announce that the ``tools``, ``prompts`` or ``resources`` list changed."""
        self._registries[kind].changed()

    # -- serving ----------------------------------------------------------------------------

    def capabilities(self) -> ServerCapabilities:
        """What this server offers now, from what is registered."""
        return self._methods.capabilities()

    def handlers(self) -> dict[str, RequestHandler]:
        """The method table this server answers, for a :class:`~millimcp.session.Router`."""
        return self._methods.handlers()

    def router(self) -> Router:
        """A router over this server's method table (each transport front runs on one)."""
        return Router(self.handlers(), Mrtr(self.sealer))

    def endpoint(self) -> HttpEndpoint:
        """The Streamable HTTP message handler (both eras) of a new ASGI app."""
        endpoint = HttpEndpoint(self.router(), self.config.sessions)
        self._endpoints.append(endpoint)
        return endpoint

    def asgi(
        self,
        *,
        path: str | Literal[_Unset.PATH] | None = _Unset.PATH,
        http: HttpConfig | None = None,
    ) -> Any:
        """A plain ASGI app serving this server's MCP endpoint at ``path``.

        The endpoint's path is ``path`` when it is given, else ``http.path``, else ``/mcp``:
        given both, ``path`` wins. Mounted inside Starlette or FastAPI
        (``Mount("/api", app=server.asgi())``) it answers at ``/api/mcp``; ``path=None``
        answers on any path and leaves routing to the host app.
        """
        config = http or HttpConfig()
        if path is not _Unset.PATH:
            config = dataclasses.replace(config, path=path)
        if self.config.server_timing and not config.server_timing:
            config = dataclasses.replace(config, server_timing=True)
        if self.config.opentelemetry:
            from millimcp.observe.otel import install

            install()
        metrics_path = self.config.metrics_path
        if self.auth is not None:
            return self._protected(config, metrics_path)
        if metrics_path is None:
            app = StreamableHTTPApp(self.endpoint(), config, lifespan=self.running)
            app.on_drain.append(self.end_streams)
            return app
        from millimcp.observe.prometheus import MetricsApp, probed

        if config.path is None:  # every path is the endpoint's: the metrics go in front
            app = StreamableHTTPApp(self.endpoint(), config, lifespan=self.running)
            app.on_drain.append(self.end_streams)
            return MetricsApp(app, metrics_path)
        # The metrics are a route of the MCP app: no extra ASGI layer on MCP calls.
        app = StreamableHTTPApp(self.endpoint(), config, lifespan=probed(self.running))
        app.on_drain.append(self.end_streams)
        app.routes[metrics_path] = MetricsApp(app, metrics_path).endpoint
        return app

    def _protected(self, config: HttpConfig, metrics_path: str | None) -> Any:
        """The endpoint behind the auth gate (imported only when auth is configured)."""
        from millimcp.transports.auth_gate import AuthGate

        assert self.auth is not None
        app = StreamableHTTPApp(self.endpoint(), config, lifespan=self.running)
        if metrics_path is not None:
            from millimcp.observe.prometheus import MetricsApp

            app.routes[metrics_path] = MetricsApp(app, metrics_path).endpoint
        gate = AuthGate(
            app,
            self.auth,
            scopes_for=self._scopes_for,
            any_scopes=self._any_scopes,
            max_body_bytes=config.max_body_bytes,
        )
        self._gates.add(gate.core)
        return gate

    def _scopes_for(self, method: str, name: str) -> Sequence[str]:
        """The ``scopes=`` of the tool, prompt or resource an operation names (the auth gate)."""
        entry: ToolEntry | PromptEntry | ResourceEntry | None
        if method == "tools/call":
            entry = self._tool_registry.get(name)
        elif method == "prompts/get":
            entry = self._prompt_registry.get(name)
        elif method in ("resources/read", "resources/subscribe"):
            found = resolve(self._resource_registry.entries, self._template_registry.entries, name)
            # else a template named by its own pattern (completion/complete's ref/resource)
            entry = self._template_registry.get(name) if found is None else found[0]
        else:
            return ()
        return entry.scopes if entry is not None else ()

    def _any_scopes(self) -> Sequence[str]:
        """Every scope some operation declares (the gate's answer to a body it cannot read)."""
        entries = [
            *self._tool_registry,
            *self._prompt_registry,
            *self._resource_registry,
            *self._template_registry,
        ]
        return union_scopes(*(entry.scopes for entry in entries))

    def run_http(
        self, *, host: str = "127.0.0.1", port: int = 8000, path: str = "/mcp", **options: Any
    ) -> None:
        """Serve over Streamable HTTP until interrupted, on the native HTTP/1.1 front unless
        ``http="uvicorn"``/``"granian"`` or ``MILLIMCP_HTTP_FRONT`` says otherwise
        (:func:`~millimcp.server.serve.run_app` takes the other ``options``)."""
        from millimcp.server.serve import run_app

        run_app(self.asgi(path=path), host=host, port=port, **options)

    def run_stdio(self, config: StdioConfig | None = None) -> str:
        """Serve over stdio until EOF, SIGTERM or SIGINT; returns which one it was.

        Runs on uvloop when it is installed and stdin and stdout are pipes, sockets or
        terminals (about 30% less CPU per call); on the standard event loop otherwise.
        """
        from millimcp.transports.stdio import fast_loop_factory

        with asyncio.Runner(loop_factory=fast_loop_factory()) as runner:
            return runner.run(self.serve_stdio(config))

    async def serve_stdio(self, config: StdioConfig | None = None, **pipes: Any) -> str:
        """Serve over stdio in the running event loop (``pipes``: stdin=, stdout= files)."""
        from millimcp.session import LineConnection
        from millimcp.transports.stdio import serve_stdio

        router = self.router()
        sessions = self.config.sessions
        async with self.running():
            return await serve_stdio(
                lambda write: LineConnection(router, write, sessions), config, **pipes
            )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The server's lifespan: the user's lifespan (what it yields is ``ctx.lifespan`` in
        the handlers meanwhile), then :meth:`close` and the cache's shutdown."""
        methods = self._methods
        try:
            if self._lifespan is not None:
                async with self._lifespan(self) as value:
                    methods.lifespan = value
                    yield
            else:
                yield
        finally:
            methods.lifespan = None
            self.close()
            await methods.tasks.manager.close()
            if self._cache is not None:
                await self._cache.close()

    def end_streams(self) -> None:
        """End every ``subscriptions/listen`` stream and handshake-era GET stream with its
        clean close, keeping sessions and calls in progress (the start of a drain)."""
        self._notifier.close()
        for endpoint in self._endpoints:
            endpoint.sessions.end_streams()

    def close(self) -> None:
        """End subscriptions gracefully and stop the pools."""
        self._notifier.close()
        for endpoint in self._endpoints:
            endpoint.close()
        self._pools.close()

    @property
    def cache(self) -> CacheStore:
        """The tool-result cache (``ServerConfig.cache``).

        ``await server.cache.invalidate("orders:42")`` drops entries in every process."""
        if self._cache is None:
            self._cache = CacheStore(self.config.cache)
        return self._cache

    @property
    def tasks(self) -> TaskManager:
        """The server's tasks (``@server.tool(task=...)``): their store (``ServerConfig.tasks``)
        and the handlers running in this process."""
        return self._methods.tasks.manager

    @property
    def executor(self) -> ThreadPoolExecutor:
        """The thread pool of sync handlers, started on first use."""
        return self._pools.threads

    @property
    def processes(self) -> ProcessPoolExecutor:
        """The process pool of ``executor="process"`` tools, started on first use."""
        return self._pools.processes

    # -- views for tests (private: not part of the API) -------------------------------------

    @property
    def _tools(self) -> dict[str, ToolEntry]:
        return self._tool_registry.entries

    @property
    def _tool_limiters(self) -> dict[str, InFlightLimiter]:
        tools = self._tool_registry.entries
        return {name: e.limiter for name, e in tools.items() if e.limiter is not None}

    @property
    def _limiter(self) -> InFlightLimiter | None:
        return self._methods.limiter

    @property
    def _processes(self) -> ProcessPoolExecutor | None:
        return self._pools.started_processes
