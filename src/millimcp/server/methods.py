"""The MCP methods a server answers, as one table of handlers over its registries.

:meth:`Methods.handlers` is the contract with the session layer: method name ->
``handler(params, ctx) -> result struct``, with ``params`` already decoded into the method's
type. Every handler that runs user code puts the value the server's lifespan yielded on
``ctx.lifespan`` first. Work methods (``tools/call``, ``resources/read``, ``prompts/get``,
``completion/complete``) wait for the server's in-flight limit (and a tool for its own);
lists, discovery, subscriptions and ``ping`` never wait. Every result carries the
``serverInfo`` ``_meta`` when ``ServerConfig.server_info_in_results`` is on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from millimcp.codec import encode
from millimcp.errors import InvalidParams, ProtocolError
from millimcp.observe import TRACE, current_record
from millimcp.protocol import MODERN_VERSIONS
from millimcp.protocol.types import (
    META_SERVER_INFO,
    TASKS_EXTENSION,
    CallToolParams,
    CallToolResult,
    CompleteParams,
    CompleteResult,
    Completion,
    CreateTaskResult,
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
    ServerCapabilities,
    SetLevelParams,
    SubscribeParams,
    TextResultTemplate,
)
from millimcp.protocol.types.tasks import detailed
from millimcp.resilience import InFlightLimiter
from millimcp.server.config import ServerConfig
from millimcp.server.invoke import context_parameter
from millimcp.server.notify import Notifier
from millimcp.server.offload import Pools
from millimcp.server.prompts import PromptEntry
from millimcp.server.registry import Registry
from millimcp.server.resources import ResourceEntry, resolve
from millimcp.server.tasks import TaskMethods
from millimcp.server.tools import ToolEntry
from millimcp.session import Context, InputRequired, RequestHandler
from millimcp.tasks import TaskRecord
from millimcp.tensor.extension import EXTENSION as TENSOR_EXTENSION
from millimcp.tensor.extension import capability as tensor_capability

__all__ = ["Completer", "Methods"]

Completer = Callable[..., Any]
"""``fn(ref, argument, context) -> list[str] | Completion``, sync or async."""
_MAX_COMPLETIONS = 100
astuple = msgspec.structs.astuple
_RAW = msgspec.Raw


class Methods:
    """The handlers of one server's MCP methods, and the state they share.

    ``lifespan`` is what the server's lifespan yielded while it runs (None otherwise);
    ``completer`` the ``completion/complete`` function, if any.
    """

    __slots__ = (
        "_completer_context",
        "_limiter",
        "_pools",
        "_result_meta",
        "_text_head",
        "_text_tail",
        "_tools",
        "completer",
        "config",
        "info",
        "instructions",
        "lifespan",
        "notifier",
        "prompts",
        "resources",
        "tasks",
        "templates",
        "tools",
    )

    def __init__(
        self,
        info: Implementation,
        instructions: str | None,
        config: ServerConfig,
        *,
        tools: Registry[ToolEntry],
        prompts: Registry[PromptEntry],
        resources: Registry[ResourceEntry],
        templates: Registry[ResourceEntry],
        notifier: Notifier,
        pools: Pools,
    ) -> None:
        self.info = info
        self.instructions = instructions
        self.config = config
        self.tools = tools
        self.prompts = prompts
        self.resources = resources
        self.templates = templates
        self.notifier = notifier
        self._pools = pools
        self._tools = tools.entries  # the dict itself: one C-level lookup per tools/call
        self.lifespan: Any = None
        self.completer: Completer | None = None
        self._completer_context: str | None = None
        limit = config.limit
        self._limiter = None if limit is None else InFlightLimiter(limit)
        self._result_meta = (
            {META_SERVER_INFO: msgspec.to_builtins(info)} if config.server_info_in_results else None
        )
        self._text_head, self._text_tail = TextResultTemplate(self._result_meta).parts
        self.tasks = TaskMethods(config.tasks, self._result_meta)
        """Tool calls as tasks, and ``tasks/get|update|cancel`` (the tasks extension)."""
        self.tasks.manager.watchers.append(self._task_changed)

    def __repr__(self) -> str:
        return f"<Methods of {self.info.name!r}>"

    @property
    def limiter(self) -> InFlightLimiter | None:
        """The server's in-flight limit over work methods (``ServerConfig.limit``)."""
        return self._limiter

    def set_completer(self, fn: Completer) -> None:
        """Answer ``completion/complete`` with ``fn``; a parameter annotated ``Context``
        receives the request's context."""
        self.completer = fn
        self._completer_context = context_parameter(fn)

    def capabilities(self) -> ServerCapabilities:
        """What this server offers now, from what is registered."""
        return ServerCapabilities(
            tools={"listChanged": True} if self.tools else None,
            resources={"subscribe": True, "listChanged": True}
            if self.resources or self.templates
            else None,
            prompts={"listChanged": True} if self.prompts else None,
            completions={} if self.completer is not None else None,
            logging={},
            extensions=self._extensions(),
        )

    def _task_changed(self, record: TaskRecord) -> None:
        """A task changed here: its status to the listeners that asked (if any listens)."""
        if len(self.notifier):
            self.notifier.task_changed(detailed(record.detailed()))

    def _extensions(self) -> dict[str, Any] | None:
        extensions: dict[str, Any] = {}
        if any(entry.tensors for entry in self.tools):
            extensions[TENSOR_EXTENSION] = tensor_capability()
        if any(entry.task is not None for entry in self.tools):
            extensions[TASKS_EXTENSION] = {}
        return extensions or None

    def handlers(self) -> dict[str, RequestHandler]:
        """The method table, for the session layer."""
        return {
            "server/discover": self._discover,
            "tools/list": self._lister(self.tools, ListToolsResult, "tools"),
            "tools/call": self._call_tool,
            "resources/list": self._lister(self.resources, ListResourcesResult, "resources"),
            "resources/templates/list": self._lister(
                self.templates, ListResourceTemplatesResult, "resource_templates"
            ),
            "resources/read": self._limited(self._read_resource),
            "prompts/list": self._lister(self.prompts, ListPromptsResult, "prompts"),
            "prompts/get": self._limited(self._get_prompt),
            "completion/complete": self._limited(self._complete),
            "subscriptions/listen": self._listen,
            "initialize": self._initialize,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "ping": _ping,
            "logging/setLevel": _set_level,
            **self.tasks.handlers(),
        }

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

    # -- the handshake era's session methods ------------------------------------------------

    async def _initialize(self, params: InitializeParams, ctx: Context) -> InitializeResult:
        if ctx.session is not None:
            self.notifier.add_session(ctx.session)
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

    # -- discovery and lists ----------------------------------------------------------------

    async def _discover(self, params: RequestParams, ctx: Context) -> DiscoverResult:
        return DiscoverResult(
            supported_versions=list(MODERN_VERSIONS),
            capabilities=self.capabilities(),
            instructions=self.instructions,
            ttl_ms=self.config.list_ttl_ms,
            cache_scope=self.config.list_cache_scope,
            meta=self._result_meta,
        )

    def _lister(self, registry: Registry[Any], result: type[Any], field: str) -> RequestHandler:
        """The handler of one ``*/list`` method: a page of encoded definitions, with hints."""

        async def list_page(params: PaginatedParams, ctx: Context) -> Any:
            page, cursor = registry.page(params.cursor)
            return result(
                **{field: page},
                next_cursor=cursor,
                ttl_ms=self.config.list_ttl_ms,
                cache_scope=self.config.list_cache_scope,
                meta=self._result_meta,
            )

        return list_page

    # -- work methods -----------------------------------------------------------------------

    async def _call_tool(
        self, params: CallToolParams, ctx: Context
    ) -> CallToolResult | CreateTaskResult | msgspec.Raw:
        entry = self._tools.get(params.name)
        if entry is None:
            raise InvalidParams(f"Unknown tool: {params.name}", {"name": params.name})
        lifespan = self.lifespan
        if lifespan is not None:  # a context starts with None: no store without a lifespan
            ctx.lifespan = lifespan
        limiter = self._limiter
        lean = entry.lean
        if lean is not None and not TRACE.active:
            # The shortest path (see ToolEntry.lean): ToolEntry.call inlined, one coroutine
            # fewer, and a text result pre-encoded (TextResultTemplate), not built.
            # The limiter's fast path, without a method call (InFlightLimiter.free).
            if limiter is not None:
                if limiter.free:
                    limiter.free -= 1
                else:
                    await limiter.acquire()
            try:
                try:
                    args = astuple(lean.decode(params.arguments or b"{}"))
                except (msgspec.DecodeError, ValueError) as exc:
                    result = entry.invalid_arguments(exc)
                else:
                    try:
                        value = await entry.fn(*args)
                    except (ProtocolError, InputRequired):
                        raise
                    except Exception as exc:
                        result = entry.failed(exc)
                    else:
                        if type(value) is str:
                            return _RAW(self._text_head + encode(value) + self._text_tail)
                        result = entry.result(value, ctx)
            finally:
                if limiter is not None:
                    if limiter.free:
                        limiter.free += 1
                    else:
                        limiter.release()
            result.meta = self._result_meta
            return result
        if entry.task is not None:
            started = await self.tasks.start(
                entry.task, entry.ask_first, params, ctx, self._task_runner(entry)
            )
            if started is not None:
                return started
        # Backpressure: the tool's own limit first (a call queued for a busy tool holds no
        # server slot), then the server's.
        tool_limiter = entry.limiter
        if tool_limiter is not None and not tool_limiter.try_acquire():
            await tool_limiter.acquire()
        try:
            if limiter is not None and not limiter.try_acquire():
                await limiter.acquire()
            try:
                result = await entry.call(params.arguments, ctx, self._pools)
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

    def _task_runner(self, entry: ToolEntry) -> Callable[[bytes, Context], Awaitable[Any]]:
        """How a task runs ``entry``: behind the tool's own limit (not the server's: a task
        is not a request in flight)."""

        async def run(arguments: bytes, ctx: Context) -> CallToolResult:
            tool_limiter = entry.limiter
            if tool_limiter is not None and not tool_limiter.try_acquire():
                await tool_limiter.acquire()
            try:
                result = await entry.call(arguments, ctx, self._pools)
            finally:
                if tool_limiter is not None:
                    tool_limiter.release()
            result.meta = None
            return result

        return run

    async def _read_resource(self, params: ReadResourceParams, ctx: Context) -> ReadResourceResult:
        uri = params.uri
        found = resolve(self.resources.entries, self.templates.entries, uri)
        if found is None:
            raise InvalidParams(f"Resource not found: {uri}", {"uri": uri})
        entry, variables = found
        ctx.lifespan = self.lifespan
        contents = await entry.read(uri, variables, ctx, self._pools)
        return ReadResourceResult(
            contents=contents,
            ttl_ms=entry.ttl_ms,
            cache_scope=entry.cache_scope,
            meta=self._result_meta,
        )

    async def _get_prompt(self, params: GetPromptParams, ctx: Context) -> GetPromptResult:
        entry = self.prompts.entries.get(params.name)
        if entry is None:
            raise InvalidParams(f"Unknown prompt: {params.name}", {"name": params.name})
        ctx.lifespan = self.lifespan
        result = await entry.get(params.arguments, ctx, self._pools)
        result.meta = self._result_meta
        return result

    async def _complete(self, params: CompleteParams, ctx: Context) -> CompleteResult:
        values: Any = []
        completer = self.completer
        if completer is not None:
            ctx.lifespan = self.lifespan
            context = params.context.arguments if params.context is not None else None
            if self._completer_context is None:
                values = completer(params.ref, params.argument, context or {})
            else:
                extra = {self._completer_context: ctx}
                values = completer(params.ref, params.argument, context or {}, **extra)
            if asyncio.iscoroutine(values):
                values = await values
        if isinstance(values, Completion):
            completion = values
        else:
            values = list(values)
            completion = Completion(
                values=values[:_MAX_COMPLETIONS],
                total=len(values),
                has_more=len(values) > _MAX_COMPLETIONS,
            )
        return CompleteResult(completion=completion, meta=self._result_meta)

    async def _listen(self, params: ListenParams, ctx: Context) -> ListenResult:
        wanted = params.notifications
        if wanted.task_ids:
            wanted = msgspec.structs.replace(
                wanted, task_ids=await self.tasks.agreed(wanted.task_ids, ctx)
            )
        subscription = await self.notifier.listen(wanted, ctx)
        meta = dict(self._result_meta or {})
        meta.update(subscription)
        return ListenResult(meta=meta)


async def _ping(params: RequestParams, ctx: Context) -> LegacyEmptyResult:
    return LegacyEmptyResult()


async def _set_level(params: SetLevelParams, ctx: Context) -> LegacyEmptyResult:
    if ctx.session is not None:
        ctx.session.set_log_level(params.level)
    return LegacyEmptyResult()
