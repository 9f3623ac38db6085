"""The application's client: ``Client.over_http(url)`` and ``Client.over_stdio(command)``.

::

    async with Client.over_http("http://127.0.0.1:8000/mcp", timeout=5.0) as client:
        tools = await client.list_tools()
        result = await client.call_tool("get_order", {"order_id": 7}, timeout=2.0)

One client talks to one server, in whichever era it speaks (found on open, remembered per
server, or forced with ``era=``). Calls are capped (``Limits``), bounded in time
(``Timeout``; a tool's own ``dev.millimcp/timeoutMs`` when the server advertises one),
retried only when safe (``Retry``), and carry a W3C ``traceparent``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, Unpack, overload

from millimcp.client.core import Core
from millimcp.client.handlers import ElicitationHandler, Handlers, RootsSource, SamplingHandler
from millimcp.client.http_choice import HttpKind, http_link
from millimcp.client.inbound import OnProgress
from millimcp.client.link import Link
from millimcp.client.options import ClientOptions
from millimcp.client.results import ClientStats, ToolResult
from millimcp.client.subscription import Subscription
from millimcp.client.tasks import Task, needs_tasks, wait_for_task
from millimcp.client.tensors import TensorType
from millimcp.client.tensors import available as tensors_available
from millimcp.errors import HeaderMismatch, MissingClientCapability
from millimcp.protocol.header_params import param_headers
from millimcp.protocol.methods import ReplyDecoder, reply_decoder
from millimcp.protocol.types import (
    CallToolResult,
    CompleteResult,
    Completion,
    CompletionRef,
    CreateTaskResult,
    GetPromptResult,
    Implementation,
    LoggingLevel,
    Prompt,
    PromptMessage,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ServerCapabilities,
    Tool,
    narrow_block,
    narrow_blocks,
)
from millimcp.resilience.policy import Limits, Retry, Timeout

if TYPE_CHECKING:
    from millimcp.client.authorizer import AuthConfig

__all__ = ["Client"]

_CALL: Final[ReplyDecoder[CallToolResult]] = reply_decoder("tools/call")
_CALL_OR_TASK: Final[ReplyDecoder[CallToolResult]] = ReplyDecoder(
    CallToolResult, input_required=True, task=True
)
_READ: Final[ReplyDecoder[ReadResourceResult]] = reply_decoder("resources/read")
_PROMPT: Final[ReplyDecoder[GetPromptResult]] = reply_decoder("prompts/get")
_COMPLETE: Final[ReplyDecoder[CompleteResult]] = reply_decoder("completion/complete")
_EMPTY: Final[ReplyDecoder[Any]] = reply_decoder("logging/setLevel")


class Client:
    """An MCP client for one server. Use ``async with``, or :meth:`open` and :meth:`close`."""

    def __init__(
        self,
        link: Link,
        *,
        key: str,
        limits: Limits | None = None,
        timeout: Timeout | float | None = Timeout(),  # noqa: B008 (frozen value object)
        retry: Retry | None = Retry(),  # noqa: B008
        era: Literal["auto", "modern", "handshake"] = "auto",
        elicitation: ElicitationHandler | None = None,
        sampling: SamplingHandler | None = None,
        roots: RootsSource | None = None,
        client_info: tuple[str, str] | Implementation = ("millimcp", "0.1.0"),
        tensors: bool = True,
        tensor_type: TensorType | None = None,
        shared_memory: bool | Literal["auto"] = False,
        log_level: LoggingLevel | None = None,
    ) -> None:
        if isinstance(client_info, tuple):
            client_info = Implementation(name=client_info[0], version=client_info[1])
        self._timeout = Timeout.coerce(timeout)
        self._core = Core(
            link,
            key,
            limits=limits or Limits(),
            timeout=self._timeout,
            retry=retry,
            era=era,
            handlers=Handlers(elicitation, sampling, roots),
            client_info=client_info,
            tensors=tensors,
            tensor_type=tensor_type,
            shared_memory=bool(shared_memory),
            log_level=log_level,
        )
        self._pipeline = self._core.pipeline
        self._catalog = self._core.catalog
        self._lists = self._catalog.lists
        self._tensors = self._core.tensors
        self._negotiation = self._core.negotiation
        self._opened = False

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def over_http(
        cls,
        url: str,
        *,
        limits: Limits | None = None,
        timeout: Timeout | float | None = Timeout(),  # noqa: B008
        retry: Retry | None = Retry(),  # noqa: B008
        era: Literal["auto", "modern", "handshake"] = "auto",
        headers: Mapping[str, str] | None = None,
        elicitation: ElicitationHandler | None = None,
        sampling: SamplingHandler | None = None,
        roots: RootsSource | None = None,
        client_info: tuple[str, str] | Implementation = ("millimcp", "0.1.0"),
        max_message_bytes: int | None = None,
        ssl: Any = None,
        tensors: bool = True,
        tensor_type: TensorType | None = None,
        max_attachment_bytes: int | None = None,
        http: HttpKind | None = None,
        auth: AuthConfig | None = None,
        shared_memory: bool | Literal["auto"] = False,
        log_level: LoggingLevel | None = None,
    ) -> Client:
        """A client of the Streamable HTTP endpoint at ``url`` (not connected yet).

        ``http`` picks the HTTP link (:mod:`millimcp.client.http_choice`): ``"native"`` (the
        default; HTTP/1.1 on asyncio and httptools) or ``"aiohttp"``. Either needs the
        ``client`` extra (else :class:`~millimcp.errors.MissingExtra`).

        ``auth`` (``docs/auth.md``): :class:`~millimcp.auth.OAuth`,
        :class:`~millimcp.auth.ClientCredentials` or :class:`~millimcp.auth.BearerToken`.
        Either link drives the authorization flow (the token on every request, a challenge
        answered by the flow and the request sent again); the flow's own requests to the
        authorization servers go through aiohttp (the ``client`` extra).

        ``headers`` are sent with every request (``Authorization``...); ``ssl`` is an
        ``ssl.SSLContext``, or False to skip verification.

        Tensors (``docs/tensors.md``): with numpy installed, ``call_tool`` takes numpy arrays
        and torch tensors as argument values and fills :attr:`ToolResult.tensors`.
        ``tensors=False`` stops declaring ``dev.millimcp/tensor`` (no raw bytes: base64
        blobs both ways); ``tensor_type`` (``"numpy"``/``"torch"``) is what result tensors
        decode to (default: the library of the call's first tensor argument, else numpy);
        ``max_attachment_bytes`` caps a raw reply (256 MiB). ``shared_memory="auto"``: when the
        server runs on this host (it opens a probe segment this client makes), tensors travel
        through ``/dev/shm`` segments instead of the socket; anywhere else, raw bytes as usual.

        ``log_level`` (``"debug"`` ... ``"emergency"``): ask the server for its log messages
        (``notifications/message``) at that level and above; they go to the
        ``millimcp.client.server`` logger. None (the default) asks for none on 2026-07-28,
        and leaves a handshake session at the server's default. :meth:`set_log_level`
        changes it.
        """
        from millimcp.client.http_reply import (
            DEFAULT_MAX_ATTACHMENT_BYTES,
            DEFAULT_MAX_MESSAGE_BYTES,
        )

        limits = limits or Limits()
        timeout = Timeout.coerce(timeout)
        extra: dict[str, Any] = {}
        if auth is not None:
            from millimcp.client.authorizer import Authorizer

            extra["auth"] = Authorizer(auth, url, ssl=ssl)
        link = http_link(
            http,
            url,
            limits=limits,
            timeout=timeout,
            headers=headers,
            max_message_bytes=max_message_bytes or DEFAULT_MAX_MESSAGE_BYTES,
            ssl=ssl,
            tensors=tensors and tensors_available(),
            max_attachment_bytes=max_attachment_bytes or DEFAULT_MAX_ATTACHMENT_BYTES,
            **extra,
        )
        return cls(
            link,
            key=url,
            limits=limits,
            timeout=timeout,
            retry=retry,
            era=era,
            elicitation=elicitation,
            sampling=sampling,
            roots=roots,
            client_info=client_info,
            tensors=tensors,
            tensor_type=tensor_type,
            shared_memory=shared_memory,
            log_level=log_level,
        )

    @classmethod
    def over_stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        max_line_bytes: int | None = None,
        era: Literal["auto", "modern", "handshake"] = "auto",
        **options: Unpack[ClientOptions],
    ) -> Client:
        """A client of a server run as a subprocess speaking MCP on its stdin/stdout.

        ``env`` is added to a short list of safe variables of this process (``PATH``,
        ``HOME``...: ``millimcp.client.stdio_process.default_environment``); ``era`` and
        ``options`` are those of :meth:`over_http` (``limits``, ``timeout``, ``retry``, the
        handlers, ``client_info``, ``tensors``, ``tensor_type``, ``log_level``; tensors go as
        base64 over stdio).
        """
        from millimcp.client.stdio_link import StdioLink

        extra = {} if max_line_bytes is None else {"max_line_bytes": max_line_bytes}
        link = StdioLink(command, list(args), env=env, cwd=cwd, **extra)
        key = "stdio:" + " ".join([command, *args]) + (f" @{cwd}" if cwd else "")
        return cls(link, key=key, era=era, **options)

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and find the server's era."""
        if not self._opened:
            await self._core.open()
            self._opened = True

    async def close(self) -> None:
        """Close the connections (and end the session, or the process). Idempotent."""
        self._opened = False
        await self._core.close()

    async def __aenter__(self) -> Client:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<Client {self._core.key} era={self.era} version={self.protocol_version}>"

    # -- what the server told us ----------------------------------------------------------

    @property
    def era(self) -> Literal["modern", "handshake"] | None:
        return self._core.era

    @property
    def protocol_version(self) -> str | None:
        return self._core.version

    @property
    def server_info(self) -> Implementation | None:
        return self._core.server_info

    @property
    def server_capabilities(self) -> ServerCapabilities:
        return self._core.server_capabilities

    @property
    def instructions(self) -> str | None:
        return self._core.instructions

    @property
    def stats(self) -> ClientStats:
        """A snapshot of the counters (calls, retries, timeouts, connections)."""
        stats = dataclasses.replace(self._core.stats)
        link = self._core.link
        stats.connections_opened = getattr(link, "connections_opened", 0)
        stats.connections_reused = getattr(link, "connections_reused", 0)
        return stats

    # -- tools ----------------------------------------------------------------------------

    async def list_tools(self, *, timeout: Timeout | float | None = None) -> list[Tool]:
        """Every tool (all pages), reused while the server's ``ttlMs`` allows.

        Over HTTP, a tool whose ``x-mcp-header`` declarations break the spec's rules is left
        out, with a warning in the log.
        """
        tools: list[Tool] = await self._catalog.read("tools", self._per_call(timeout))
        return tools

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        as_task: Literal[True],
        timeout: Timeout | float | None = None,
        on_progress: OnProgress | None = None,
        idempotent: bool | None = None,
        tensor_type: TensorType | None = None,
    ) -> Task: ...

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        as_task: Literal[False] = False,
        timeout: Timeout | float | None = None,
        on_progress: OnProgress | None = None,
        idempotent: bool | None = None,
        tensor_type: TensorType | None = None,
    ) -> ToolResult: ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        as_task: bool = False,
        timeout: Timeout | float | None = None,
        on_progress: OnProgress | None = None,
        idempotent: bool | None = None,
        tensor_type: TensorType | None = None,
    ) -> ToolResult | Task:
        """Call a tool. ``timeout`` (seconds or a :class:`Timeout`) overrides the tool's own
        (``dev.millimcp/timeoutMs``, learned from :meth:`list_tools`) and the client's.

        Retried after a failure only when safe: the request never left, or the tool is
        ``readOnlyHint``/``idempotentHint`` (``idempotent`` overrides the annotations).
        ``on_progress(progress, total, message)`` gets the tool's progress notifications.
        Argument values may be numpy arrays or torch tensors (or dicts of them); the result's
        tensors are in ``.tensors``, as ``tensor_type`` says (see :meth:`over_http`).

        ``as_task=True`` declares the tasks extension on the call and returns a
        :class:`~millimcp.client.tasks.Task` as soon as the server created one (a finished
        one when the server answered at once): follow it, answer it, cancel it or await its
        result meanwhile. Without it, a tool that requires a task (the server answers
        -32021 naming the extension) is called again as a task and waited for, within the
        call's ``timeout``: existing code keeps working.

        Over HTTP, a ``-32020`` (the server wants ``Mcp-Param-*`` headers the client did not
        know of) makes the client read ``tools/list`` again and resend once, as the spec
        advises: the server refused the call before running it.
        """
        http = self._core.http
        info = self._catalog.tools.get(name)
        extra = None
        if info is not None:
            if info.headers and arguments and http:
                extra = param_headers(info.headers, arguments)
            if idempotent is None:
                idempotent = info.idempotent
            if timeout is None and info.timeout is not None:
                timeout = info.timeout
        codec = self._tensors
        tensor_call = None
        if codec is not None:  # tensors become cid: references or base64 (client/tensors.py)
            arguments, tensor_call = codec.prepare(arguments, tensor_type, self._negotiation)
        attachment = None if tensor_call is None else tensor_call.parts
        params = {"name": name, "arguments": {} if arguments is None else arguments}
        deadline = self._per_call(timeout)
        tasks = as_task
        resent = False
        try:
            while True:
                try:
                    result, received = await self._pipeline.call_with_attachment(
                        "tools/call",
                        params,
                        _CALL_OR_TASK if tasks else _CALL,
                        name=name,
                        extra_headers=extra,
                        idempotent=bool(idempotent),
                        timeout=deadline,
                        on_progress=on_progress,
                        attachment=attachment,
                        tasks=tasks,
                    )
                    break
                except MissingClientCapability as exc:
                    if tasks or not needs_tasks(exc):
                        raise
                    tasks = True  # the tool runs only as a task: call it as one, and wait
                except HeaderMismatch:
                    if resent or not http or not arguments:
                        raise
                    resent = True
                    self._lists.invalidate("tools")
                    await self.list_tools()
                    info = self._catalog.tools.get(name)
                    if info is None or not info.headers:
                        raise
                    extra = param_headers(info.headers, arguments)
        except BaseException:
            if tensor_call is not None:
                tensor_call.release()  # freed by decode otherwise
            raise
        if isinstance(result, CreateTaskResult):
            if tensor_call is not None:
                tensor_call.abandon()  # the task may read its arguments later: never reused
            task = Task(self._pipeline, result)
            if as_task:
                return task
            return await wait_for_task(task, deadline or self._timeout)
        content = narrow_blocks(result.content)
        tool_result = ToolResult(
            content,
            result.structured_content,
            bool(result.is_error),
            result.meta,
            None if codec is None else codec.decode(content, tensor_call, tensor_type, received),
        )
        if as_task:
            return Task.finished(self._pipeline, tool_result)
        return tool_result

    async def task(self, task_id: str) -> Task:
        """The task ``task_id`` as the server has it now (``tasks/get``): resume following a
        task after a reconnect or a restart (the id is all a client needs to keep)."""
        task = Task.resume(self._pipeline, task_id)
        await task.refresh()
        return task

    # -- resources ------------------------------------------------------------------------

    async def list_resources(self, *, timeout: Timeout | float | None = None) -> list[Resource]:
        resources: list[Resource] = await self._catalog.read("resources", self._per_call(timeout))
        return resources

    async def list_resource_templates(
        self, *, timeout: Timeout | float | None = None
    ) -> list[ResourceTemplate]:
        templates: list[ResourceTemplate] = await self._catalog.read(
            "templates", self._per_call(timeout)
        )
        return templates

    async def read_resource(
        self, uri: str, *, timeout: Timeout | float | None = None
    ) -> ReadResourceResult:
        """A resource's contents (``TextResourceContents`` / ``BlobResourceContents``).

        A handshake-era server sends no caching hints: ``ttl_ms`` is then 0 and
        ``cache_scope`` ``"private"``.
        """
        result = await self._pipeline.call(
            "resources/read", {"uri": uri}, _READ, name=uri, timeout=self._per_call(timeout)
        )
        return ReadResourceResult(
            contents=[item.narrow() for item in result.contents],
            ttl_ms=result.ttl_ms or 0,
            cache_scope="public" if result.cache_scope == "public" else "private",
            meta=result.meta,
        )

    # -- prompts and completion -----------------------------------------------------------

    async def list_prompts(self, *, timeout: Timeout | float | None = None) -> list[Prompt]:
        prompts: list[Prompt] = await self._catalog.read("prompts", self._per_call(timeout))
        return prompts

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: Timeout | float | None = None,
    ) -> GetPromptResult:
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = dict(arguments)
        result = await self._pipeline.call(
            "prompts/get", params, _PROMPT, name=name, timeout=self._per_call(timeout)
        )
        return GetPromptResult(
            messages=[
                PromptMessage(role=m.role, content=narrow_block(m.content)) for m in result.messages
            ],
            description=result.description,
            meta=result.meta,
        )

    async def complete(
        self,
        ref: CompletionRef,
        argument: tuple[str, str],
        *,
        context: Mapping[str, str] | None = None,
        timeout: Timeout | float | None = None,
    ) -> Completion:
        """Completions for one argument of a prompt or resource template: ``argument`` is
        ``(name, value so far)``; ``context`` the arguments already chosen."""
        params: dict[str, Any] = {
            "ref": ref,
            "argument": {"name": argument[0], "value": argument[1]},
        }
        if context:
            params["context"] = {"arguments": dict(context)}
        result = await self._pipeline.call(
            "completion/complete", params, _COMPLETE, timeout=self._per_call(timeout)
        )
        assert isinstance(result, CompleteResult)
        return result.completion

    async def set_log_level(self, level: LoggingLevel | None) -> None:
        """Ask for the server's log messages at ``level`` and above from now on (None: stop
        asking, on 2026-07-28). In the handshake era this sends ``logging/setLevel`` (when
        the server declares logging), which sets the session's level."""
        self._core.envelope.set_log_level(level)
        capabilities = self.server_capabilities
        if level is not None and self.era == "handshake" and capabilities.logging is not None:
            await self._pipeline.call("logging/setLevel", {"level": level}, _EMPTY)

    # -- notifications --------------------------------------------------------------------

    def subscribe(
        self,
        *,
        tools_list_changed: bool = False,
        prompts_list_changed: bool = False,
        resources_list_changed: bool = False,
        resources: Sequence[str] = (),
    ) -> Subscription:
        """Notifications the server starts: list changes, updates of the given resources.

        ::

            async with client.subscribe(resources=["file:///x"]) as updates:
                async for note in updates:
                    print(note.method, note.uri)

        Iterating it without ``async with`` also works (it opens on the first ``anext``);
        :meth:`Subscription.aclose` or closing the client ends it.
        """
        return Subscription(
            self._core,
            tools_list_changed=tools_list_changed,
            prompts_list_changed=prompts_list_changed,
            resources_list_changed=resources_list_changed,
            resources=resources,
        )

    # -- helpers --------------------------------------------------------------------------

    def _per_call(self, timeout: Timeout | float | None) -> Timeout | None:
        """A per-call timeout: seconds replace the client's total, a Timeout replaces it."""
        if timeout is None:
            return None
        if isinstance(timeout, Timeout):
            return timeout
        return dataclasses.replace(self._timeout, total=float(timeout))
