"""The application API: ``Server`` with ``@tool``, ``@resource``, ``@prompt``, ``asgi()``."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import inspect
import os
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Final, Literal, TypeVar

import msgspec

from millimcp.cache import Cache, CachedTool, CacheStore, Invalidates
from millimcp.errors import InvalidParams
from millimcp.observe import TRACE, current_record
from millimcp.protocol import MODERN_VERSIONS, RequestStateSealer, encode_notification
from millimcp.protocol.types import (
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    CacheScope,
    CallToolParams,
    CallToolResult,
    CompleteParams,
    CompleteResult,
    Completion,
    DiscoverResult,
    GetPromptParams,
    GetPromptResult,
    Implementation,
    InitializeParams,
    InitializeResult,
    LegacyEmptyResult,
    ListenParams,
    ListenResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedParams,
    ReadResourceParams,
    ReadResourceResult,
    RequestParams,
    ResourceUpdatedParams,
    ServerCapabilities,
    SetLevelParams,
    SubscribeParams,
    SubscriptionFilter,
    SubscriptionsAcknowledgedParams,
    ToolAnnotations,
)
from millimcp.resilience import ConcurrencyLimit, InFlightLimiter
from millimcp.server.config import ServerConfig
from millimcp.server.offload import new_process_pool, stop_process_pool
from millimcp.server.prompts import PromptEntry
from millimcp.server.resources import ResourceEntry
from millimcp.server.tools import ToolEntry
from millimcp.session import Context, HttpEndpoint, Mrtr, RequestHandler, Router, Session
from millimcp.tensor.extension import EXTENSION as TENSOR_EXTENSION
from millimcp.tensor.extension import capability as tensor_capability
from millimcp.transports.http import HttpConfig, StreamableHTTPApp
from millimcp.transports.stdio import StdioConfig

__all__ = ["Server"]

F = TypeVar("F", bound=Callable[..., Any])
Completer = Callable[..., Any]
_CLOSED: Final = object()
_LIST_CHANGED: Final = {  # registry kind -> (notification, SubscriptionFilter flag)
    "tools": ("notifications/tools/list_changed", "tools_list_changed"),
    "prompts": ("notifications/prompts/list_changed", "prompts_list_changed"),
    "resources": ("notifications/resources/list_changed", "resources_list_changed"),
    "templates": ("notifications/resources/list_changed", "resources_list_changed"),
}


class _Listener:
    """One ``subscriptions/listen`` stream: its filter and a bounded queue of messages."""

    __slots__ = ("filter", "queue", "resources")

    def __init__(self, agreed: SubscriptionFilter, size: int) -> None:
        self.filter = agreed
        self.resources = frozenset(agreed.resource_subscriptions or ())
        self.queue: asyncio.Queue[Any] = asyncio.Queue(size)


class Server:
    """An MCP server: register tools, resources and prompts, then serve ``asgi()``."""

    def __init__(
        self,
        name: str,
        version: str = "0.0.0",
        instructions: str | None = None,
        *,
        title: str | None = None,
        website_url: str | None = None,
        config: ServerConfig | None = None,
        lifespan: Callable[[Server], contextlib.AbstractAsyncContextManager[Any]] | None = None,
    ) -> None:
        self.info = Implementation(name=name, version=version, title=title, website_url=website_url)
        self.instructions = instructions
        self.config = config or ServerConfig()
        self._lifespan = lifespan
        self._tools: dict[str, ToolEntry] = {}
        self._resources: dict[str, ResourceEntry] = {}
        self._templates: list[ResourceEntry] = []
        self._prompts: dict[str, PromptEntry] = {}
        self._completer: Completer | None = None
        self._listeners: set[_Listener] = set()
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()
        """Handshake-era sessions, told about list changes and subscribed resources."""
        self._endpoints: list[HttpEndpoint] = []
        self._lists: dict[str, list[msgspec.Raw]] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._cache: CacheStore | None = None
        self._processes: ProcessPoolExecutor | None = None
        limit = self.config.limit
        self._limiter = None if limit is None else InFlightLimiter(limit)
        self._tool_limiters: dict[str, InFlightLimiter] = {}
        key = self.config.state_key
        if key is None:
            env = os.environ.get("MILLIMCP_STATE_KEY")
            key = bytes.fromhex(env) if env else os.urandom(32)
        self.sealer = RequestStateSealer(key, ttl=self.config.state_ttl_s)
        self._result_meta = (
            {META_SERVER_INFO: msgspec.to_builtins(self.info)}
            if self.config.server_info_in_results
            else None
        )

    def __repr__(self) -> str:
        return (
            f"<Server {self.info.name!r} tools={len(self._tools)} "
            f"resources={len(self._resources) + len(self._templates)} "
            f"prompts={len(self._prompts)} listeners={len(self._listeners)}>"
        )

    # -- registration ---------------------------------------------------------------------

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
    ) -> Callable[[F], F]:
        """Register a tool. Its input schema comes from the type hints of its parameters.

        A typed return (struct, dataclass, TypedDict, pydantic model, dict/list/number) gives
        an ``outputSchema`` and ``structuredContent``, mirrored as JSON text unless
        ``text_mirror=False``; ``structured=False`` turns that off. A ``str`` return is text;
        content blocks are sent as they are. Sync functions run on the server's thread pool.
        ``timeout`` (seconds) is enforced and advertised in ``_meta["dev.millimcp/timeoutMs"]``.
        ``headers`` maps parameters to ``Mcp-Param-{name}`` headers (``x-mcp-header``) that
        HTTP clients must send and the server checks against the arguments.
        ``input_schema`` replaces the generated schema on the wire (served verbatim); the
        arguments are still decoded by the function's signature.
        ``timeout=None`` takes ``ServerConfig.tool_timeout_s``.
        ``concurrency`` limits this tool's calls in flight and queued (besides the server's
        ``ServerConfig.limit``); beyond both, the call is refused with HTTP 503.
        ``executor="process"`` runs a CPU-bound sync, module-level function in the server's
        process pool (``ServerConfig.process_workers``) instead of its thread pool.
        ``cache`` caches its successful results (:class:`~millimcp.cache.Cache`: TTL, scope,
        key, tags); ``invalidates`` lists tags, formatted from the arguments
        (``"orders:{user_id}"``), dropped from the cache after each successful call.
        """
        if timeout is None:
            timeout = self.config.tool_timeout_s

        def register(fn: F) -> F:
            tool_name = name or fn.__name__
            parameters = tuple(inspect.signature(fn).parameters)
            entry = ToolEntry(
                fn,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                timeout=timeout,
                structured=structured,
                text_mirror=text_mirror,
                meta=meta,
                headers=headers,
                input_schema=input_schema,
                cached=None
                if cache is None
                else CachedTool(self.cache, cache, tool_name, parameters),
                invalidates=None
                if not invalidates
                else Invalidates(self.cache, invalidates, tool_name, parameters),
                process=executor == "process",
            )
            self._tools[entry.name] = entry
            if concurrency is not None:
                self._tool_limiters[entry.name] = InFlightLimiter(concurrency, f"tool {entry.name}")
            else:
                self._tool_limiters.pop(entry.name, None)
            self._changed("tools")
            return fn

        return register

    def remove_tool(self, name: str) -> None:
        del self._tools[name]
        self._tool_limiters.pop(name, None)
        self._changed("tools")

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
    ) -> Callable[[F], F]:
        """Register a resource, or a template when ``uri`` has ``{variables}``.

        Returning ``str`` gives text contents, ``bytes`` a base64 blob; a template's
        function takes its variables as parameters.
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
            )
            if entry.template is None:
                self._resources[uri] = entry
                self._changed("resources")
            else:
                self._templates.append(entry)
                self._changed("templates")
            return fn

        return register

    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        argument_descriptions: dict[str, str] | None = None,
    ) -> Callable[[F], F]:
        """Register a prompt; its parameters are its (string) arguments."""

        def register(fn: F) -> F:
            entry = PromptEntry(
                fn,
                name=name,
                title=title,
                description=description,
                argument_descriptions=argument_descriptions,
            )
            self._prompts[entry.name] = entry
            self._changed("prompts")
            return fn

        return register

    def completion(self) -> Callable[[F], F]:
        """Register the completion handler: ``fn(ref, argument, context) -> list[str]``.

        ``ref`` is a :class:`~millimcp.protocol.types.CompletionRef`, ``argument`` a
        :class:`~millimcp.protocol.types.CompleteArgument`, ``context`` a dict of the other
        arguments already filled in. It may be sync or async and may return a ``Completion``.
        """

        def register(fn: F) -> F:
            self._completer = fn
            return fn

        return register

    # -- notifications ----------------------------------------------------------------------

    def _changed(self, kind: str) -> None:
        self._lists.pop(kind, None)
        method, flag = _LIST_CHANGED[kind]
        for listener in tuple(self._listeners):
            if getattr(listener.filter, flag):
                self._deliver(listener, method, None)
        if self._sessions:
            message = encode_notification(method)
            for session in tuple(self._sessions):
                session.post(message)

    def notify_resource_updated(self, uri: str) -> None:
        """Tell every stream and session subscribed to ``uri`` that it changed."""
        for listener in tuple(self._listeners):
            if uri in listener.resources:
                self._deliver(listener, "notifications/resources/updated", uri)
        message: bytes | None = None
        for session in tuple(self._sessions):
            if uri in session.subscriptions:
                if message is None:
                    message = encode_notification(
                        "notifications/resources/updated", ResourceUpdatedParams(uri=uri)
                    )
                session.post(message)

    def notify_list_changed(self, kind: str) -> None:
        """Announce that the ``tools``, ``prompts`` or ``resources`` list changed."""
        self._changed(kind)

    def _deliver(self, listener: _Listener, method: str, uri: str | None) -> None:
        try:
            listener.queue.put_nowait((method, uri))
        except asyncio.QueueFull:
            # A consumer this far behind is closed rather than allowed to grow without bound.
            self._listeners.discard(listener)
            listener.queue.get_nowait()
            listener.queue.put_nowait(_CLOSED)

    # -- serving ----------------------------------------------------------------------------

    def capabilities(self) -> ServerCapabilities:
        return ServerCapabilities(
            tools={"listChanged": True} if self._tools else None,
            resources={"subscribe": True, "listChanged": True}
            if self._resources or self._templates
            else None,
            prompts={"listChanged": True} if self._prompts else None,
            completions={} if self._completer is not None else None,
            logging={},
            extensions=(
                {TENSOR_EXTENSION: tensor_capability()}
                if any(entry.tensors for entry in self._tools.values())
                else None
            ),
        )

    def handlers(self) -> dict[str, RequestHandler]:
        """The method table this server answers, for a :class:`~millimcp.session.Router`."""
        return {
            "server/discover": self._discover,
            "tools/list": self._lister("tools", ListToolsResult, "tools"),
            "tools/call": self._call_tool,
            "resources/list": self._lister("resources", ListResourcesResult, "resources"),
            "resources/templates/list": self._lister(
                "templates", ListResourceTemplatesResult, "resource_templates"
            ),
            "resources/read": self._limited(self._read_resource),
            "prompts/list": self._lister("prompts", ListPromptsResult, "prompts"),
            "prompts/get": self._limited(self._get_prompt),
            "completion/complete": self._limited(self._complete),
            "subscriptions/listen": self._listen,
            "initialize": self._initialize,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "ping": _ping,
            "logging/setLevel": _set_level,
        }

    def router(self) -> Router:
        """A router over this server's method table (each transport front runs on one)."""
        return Router(self.handlers(), Mrtr(self.sealer))

    def endpoint(self) -> HttpEndpoint:
        """The Streamable HTTP message handler (both eras) of a new ASGI app."""
        endpoint = HttpEndpoint(self.router(), self.config.sessions)
        self._endpoints.append(endpoint)
        return endpoint

    def asgi(self, *, path: str | None = "/mcp", http: HttpConfig | None = None) -> Any:
        """A plain ASGI app serving this server's MCP endpoint at ``path``.

        Mounted inside Starlette or FastAPI (``Mount("/api", app=server.asgi())``) it answers
        at ``/api/mcp``; ``path=None`` answers on any path and leaves routing to the host app.
        """
        config = HttpConfig(path=path) if http is None else dataclasses.replace(http, path=path)
        if self.config.server_timing and not config.server_timing:
            config = dataclasses.replace(config, server_timing=True)
        if self.config.opentelemetry:
            from millimcp.observe.otel import install

            install()
        metrics_path = self.config.metrics_path
        if metrics_path is None:
            return StreamableHTTPApp(self.endpoint(), config, lifespan=self.running)
        from millimcp.observe.prometheus import MetricsApp, probed

        if path is None:  # every path is the endpoint's: the metrics go in front
            app = StreamableHTTPApp(self.endpoint(), config, lifespan=self.running)
            return MetricsApp(app, metrics_path)
        # The metrics are a route of the MCP app: no extra ASGI layer on MCP calls.
        app = StreamableHTTPApp(self.endpoint(), config, lifespan=probed(self.running))
        app.routes[metrics_path] = MetricsApp(app, metrics_path).endpoint
        return app

    def run_http(
        self, *, host: str = "127.0.0.1", port: int = 8000, path: str = "/mcp", **options: Any
    ) -> None:
        """Serve over Streamable HTTP until interrupted (uvicorn; see ``millimcp.cli``)."""
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
        """The server's lifespan: the user's lifespan, then the thread pool's shutdown."""
        try:
            if self._lifespan is not None:
                async with self._lifespan(self):
                    yield
            else:
                yield
        finally:
            self.close()
            if self._cache is not None:
                await self._cache.close()

    def close(self) -> None:
        """End subscriptions gracefully and stop the thread pool."""
        for listener in tuple(self._listeners):
            with contextlib.suppress(asyncio.QueueFull):
                listener.queue.put_nowait(_CLOSED)
        self._listeners.clear()
        for endpoint in self._endpoints:
            endpoint.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        if self._processes is not None:
            stop_process_pool(self._processes)
            self._processes = None

    @property
    def cache(self) -> CacheStore:
        """The tool-result cache (``ServerConfig.cache``).

        ``await server.cache.invalidate("orders:42")`` drops entries in every process."""
        if self._cache is None:
            self._cache = CacheStore(self.config.cache)
        return self._cache

    @property
    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                self.config.sync_workers, thread_name_prefix="millimcp-sync"
            )
        return self._executor

    @property
    def processes(self) -> ProcessPoolExecutor:
        """The process pool of ``executor="process"`` tools, started on first use."""
        if self._processes is None:
            self._processes = new_process_pool(self.config.process_workers)
        return self._processes

    def _limited(self, handler: RequestHandler) -> RequestHandler:
        """``handler`` behind the server's in-flight limit (backpressure)."""
        limiter = self._limiter
        if limiter is None:
            return handler

        async def limited(params: Any, ctx: Context) -> Any:
            if not limiter.try_acquire():
                await limiter.acquire()
            try:
                return await handler(params, ctx)
            finally:
                limiter.release()

        return limited

    # -- method handlers --------------------------------------------------------------------

    async def _initialize(self, params: InitializeParams, ctx: Context) -> InitializeResult:
        if ctx.session is not None:
            self._sessions.add(ctx.session)
        return InitializeResult(
            protocol_version=ctx.protocol_version or params.protocol_version,
            capabilities=self.capabilities(),
            server_info=self.info,
            instructions=self.instructions,
        )

    async def _subscribe(self, params: SubscribeParams, ctx: Context) -> LegacyEmptyResult:
        if ctx.session is None:
            raise InvalidParams("Invalid params: resources/subscribe needs a session")
        ctx.session.subscriptions.add(params.uri)
        return LegacyEmptyResult()

    async def _unsubscribe(self, params: SubscribeParams, ctx: Context) -> LegacyEmptyResult:
        if ctx.session is not None:
            ctx.session.subscriptions.discard(params.uri)
        return LegacyEmptyResult()

    async def _discover(self, params: RequestParams, ctx: Context) -> DiscoverResult:
        return DiscoverResult(
            supported_versions=list(MODERN_VERSIONS),
            capabilities=self.capabilities(),
            instructions=self.instructions,
            ttl_ms=self.config.list_ttl_ms,
            cache_scope=self.config.list_cache_scope,
            meta=self._result_meta,
        )

    def _page(self, kind: str, params: PaginatedParams) -> tuple[list[Any], str | None]:
        items = self._lists.get(kind)
        if items is None:
            by_kind: dict[str, Sequence[Any]] = {
                "tools": list(self._tools.values()),
                "prompts": list(self._prompts.values()),
                "resources": list(self._resources.values()),
                "templates": self._templates,
            }
            entries = by_kind[kind]
            items = [msgspec.Raw(msgspec.json.encode(e.definition)) for e in entries]
            self._lists[kind] = items
        start = _decode_cursor(params.cursor) if params.cursor else 0
        end = start + self.config.page_size
        return items[start:end], _encode_cursor(end) if end < len(items) else None

    def _lister(self, kind: str, result: type[Any], field: str) -> RequestHandler:
        """The handler of one ``*/list`` method: a page of cached definitions, with hints."""

        async def list_page(params: PaginatedParams, ctx: Context) -> Any:
            page, cursor = self._page(kind, params)
            return result(
                **{field: page},
                next_cursor=cursor,
                ttl_ms=self.config.list_ttl_ms,
                cache_scope=self.config.list_cache_scope,
                meta=self._result_meta,
            )

        return list_page

    async def _call_tool(self, params: CallToolParams, ctx: Context) -> CallToolResult:
        entry = self._tools.get(params.name)
        if entry is None:
            raise InvalidParams(f"Unknown tool: {params.name}", {"name": params.name})
        # Backpressure: the tool's own limit first (a call queued for a busy tool holds no
        # server slot), then the server's.
        tool_limiter = self._tool_limiters.get(params.name) if self._tool_limiters else None
        if tool_limiter is not None and not tool_limiter.try_acquire():
            await tool_limiter.acquire()
        try:
            limiter = self._limiter
            if limiter is not None and not limiter.try_acquire():
                await limiter.acquire()
            try:
                pool = self.processes if entry.process else (self._executor or self.executor)
                result = await entry.call(params.arguments, ctx, pool)
            finally:
                if limiter is not None:
                    limiter.release()
        finally:
            if tool_limiter is not None:
                tool_limiter.release()
        result.meta = self._result_meta
        if result.is_error and TRACE.active:
            record = current_record()
            if record is not None:
                record.tool_error = True
        return result

    async def _read_resource(self, params: ReadResourceParams, ctx: Context) -> ReadResourceResult:
        uri = params.uri
        entry = self._resources.get(uri)
        variables: dict[str, str] | None = {}
        if entry is None:
            for template in self._templates:
                assert template.template is not None
                variables = template.template.match(uri)
                if variables is not None:
                    entry = template
                    break
        if entry is None or variables is None:
            raise InvalidParams(f"Resource not found: {uri}", {"uri": uri})
        contents = await entry.read(uri, variables, ctx, self._executor or self.executor)
        return ReadResourceResult(
            contents=contents,
            ttl_ms=entry.ttl_ms,
            cache_scope=entry.cache_scope,
            meta=self._result_meta,
        )

    async def _get_prompt(self, params: GetPromptParams, ctx: Context) -> GetPromptResult:
        entry = self._prompts.get(params.name)
        if entry is None:
            raise InvalidParams(f"Unknown prompt: {params.name}", {"name": params.name})
        result = await entry.get(params.arguments, ctx, self._executor or self.executor)
        result.meta = self._result_meta
        return result

    async def _complete(self, params: CompleteParams, ctx: Context) -> CompleteResult:
        values: Any = []
        if self._completer is not None:
            context = params.context.arguments if params.context is not None else None
            values = self._completer(params.ref, params.argument, context or {})
            if asyncio.iscoroutine(values):
                values = await values
        if isinstance(values, Completion):
            completion = values
        else:
            values = list(values)
            completion = Completion(
                values=values[:100], total=len(values), has_more=len(values) > 100
            )
        return CompleteResult(completion=completion, meta=self._result_meta)

    async def _listen(self, params: ListenParams, ctx: Context) -> ListenResult:
        wanted = params.notifications
        agreed = SubscriptionFilter(
            tools_list_changed=wanted.tools_list_changed or None,
            prompts_list_changed=wanted.prompts_list_changed or None,
            resources_list_changed=wanted.resources_list_changed or None,
            resource_subscriptions=wanted.resource_subscriptions,
        )
        subscription = {META_SUBSCRIPTION_ID: ctx.request_id}
        listener = _Listener(agreed, self.config.listener_queue)
        self._listeners.add(listener)
        try:
            await ctx.send_notification(
                "notifications/subscriptions/acknowledged",
                SubscriptionsAcknowledgedParams(notifications=agreed, meta=subscription),
            )
            while True:
                item = await listener.queue.get()
                if item is _CLOSED:
                    break
                method, uri = item
                params_out: Any = (
                    ResourceUpdatedParams(uri=uri, meta=subscription)
                    if uri is not None
                    else {"_meta": subscription}
                )
                await ctx.send_notification(method, params_out)
        finally:
            self._listeners.discard(listener)
        meta = dict(self._result_meta or {})
        meta.update(subscription)
        return ListenResult(meta=meta)


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode("ascii")


def _decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode()
        if text.startswith("o:") and text[2:].isdigit():
            return int(text[2:])
    except (ValueError, binascii.Error, UnicodeError):
        pass
    raise InvalidParams("Invalid params: unknown cursor", {"cursor": cursor})


async def _ping(params: RequestParams, ctx: Context) -> LegacyEmptyResult:
    return LegacyEmptyResult()


async def _set_level(params: SetLevelParams, ctx: Context) -> LegacyEmptyResult:
    if ctx.session is not None:
        ctx.session.set_log_level(params.level)
    return LegacyEmptyResult()
