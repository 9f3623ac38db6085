"""Tool entries: a registered function, its definition, and how one call runs."""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Callable
from functools import partial
from typing import Any, Final

import msgspec

from millimcp.cache import CachedTool, CacheStore, Invalidates
from millimcp.codec import encode
from millimcp.errors import (
    ConfigurationError,
    InvalidHeaderDeclaration,
    ProtocolError,
    ToolError,
)
from millimcp.observe import TRACE, clock, current_record
from millimcp.protocol.header_params import (
    HeaderParam,
    check_param_headers,
    declare,
    header_params,
)
from millimcp.protocol.types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    Icon,
    ImageContent,
    ResourceLink,
    TextContent,
    Tool,
    ToolAnnotations,
)
from millimcp.protocol.versions import is_modern
from millimcp.resilience import InFlightLimiter
from millimcp.server.invoke import Invoker
from millimcp.server.offload import Pools
from millimcp.server.options import ToolOptions
from millimcp.server.schema import ArgumentModel, OutputModel
from millimcp.session import Context, InputRequired
from millimcp.tensor.extension import (
    EXTENSION,
    RequestAttachment,
    encode_result,
    is_tensor_result,
    peer_accepts,
    shared_memory_peer,
    tensor_return,
)

__all__ = ["TIMEOUT_META_KEY", "ToolEntry", "to_call_result"]

log: Final = logging.getLogger("millimcp.server")

TIMEOUT_META_KEY: Final = "dev.millimcp/timeoutMs"
_CONTENT_TYPES: Final = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)
_DEFAULT_OPTIONS: Final = ToolOptions()
_NO_KWARGS: Final[dict[str, Any]] = {}
astuple: Final = msgspec.structs.astuple


class ToolEntry:
    """One tool: its wire definition, the callable behind it and how one call runs.

    ``options`` are read once, here; ``store`` is the server's result cache, needed when the
    options ask for ``cache`` or ``invalidates``.
    """

    __slots__ = (
        "args",
        "ask_first",
        "cached",
        "decode",
        "definition",
        "fn",
        "header_params",
        "invalidates",
        "invoke",
        "is_async",
        "lean",
        "limiter",
        "meta",
        "name",
        "output",
        "plain",
        "positional",
        "process",
        "scopes",
        "task",
        "tensors",
        "text_mirror",
        "timeout",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        options: ToolOptions = _DEFAULT_OPTIONS,
        *,
        store: CacheStore | None = None,
    ) -> None:
        self.fn = fn
        self.name = options.name or fn.__name__
        self.process = options.executor == "process"
        """Runs in the server's process pool (``executor="process"``)."""
        self.timeout = options.timeout
        self.scopes: tuple[str, ...] = tuple(options.scopes)
        self.task = None if options.task in (None, "never") else options.task
        """``"optional"`` or ``"required"``: the call may run as a task; None: never."""
        self.ask_first = options.ask_first
        self.args = ArgumentModel(fn, struct_name=f"{self.name}_arguments")
        self.decode: Callable[[bytes], dict[str, Any]] = options.arguments or self.args.decode
        """Raw JSON arguments -> keyword arguments (the signature's struct, or ``arguments=``)."""
        self.invoke = Invoker(
            fn, context_param=self.args.context_param, timeout=self.timeout, process=self.process
        )
        self.is_async = self.invoke.is_async
        input_schema = options.input_schema
        wire_schema = self.args.schema if input_schema is None else dict(input_schema)
        self.header_params = _header_params(wire_schema, options.headers or {}, fn.__qualname__)
        hints = typing.get_type_hints(fn, include_extras=True)
        returns = hints.get("return", inspect.Signature.empty)
        returns_tensors = tensor_return(returns)
        self.tensors = returns_tensors or bool(self.args.tensor_fields)
        """Takes or returns tensors (dev.millimcp/tensor)."""
        self.cached, self.invalidates = _cache_bindings(fn, self.name, options, store)
        """The cache policy and the tags to invalidate, bound to the server's store, or None."""
        if self.tensors and self.cached is not None:
            # a cached result would lose its raw attachment, and arrays make no cache key
            raise ConfigurationError(f"{fn.__qualname__}: a tool with tensors cannot be cached")
        self.limiter = (
            None
            if options.concurrency is None
            else InFlightLimiter(options.concurrency, f"tool {self.name}")
        )
        """This tool's own in-flight limit (``concurrency=``), or None."""
        self.output = (
            OutputModel.for_return(returns)
            if options.structured is not False and not returns_tensors
            else None
        )
        self.text_mirror = options.text_mirror
        annotations = options.annotations
        if isinstance(annotations, dict):
            annotations = msgspec.convert(annotations, ToolAnnotations)
        meta = dict(options.meta or {})
        if self.timeout is not None:
            meta[TIMEOUT_META_KEY] = int(self.timeout * 1000)
        if self.tensors:
            meta[EXTENSION] = {
                "arguments": list(self.args.tensor_fields),
                "result": returns_tensors,
            }
        self.meta = meta or None
        self.plain = (
            self.is_async
            and not self.tensors
            and self.timeout is None
            and not self.header_params
            and self.args.context_param is None
            and self.cached is None
            and self.invalidates is None
        )
        """The common case (async, no timeout, no context, no header params, no cache): a
        shorter path."""
        self.positional = (
            self.args.decoder
            if self.plain and options.arguments is None and self.args.positional
            else None
        )
        """On the shorter path, the arguments struct's decoder when its fields can be passed
        positionally: no keyword dict is built, nor unpacked."""
        self.lean = self.positional if self.task is None and self.limiter is None else None
        """The shortest path, taken by the server's ``tools/call`` itself (no coroutine of
        :meth:`call`): ``positional``, when the tool also has no task mode and no limit of
        its own."""
        self.definition = Tool(
            name=self.name,
            title=options.title,
            description=(
                inspect.getdoc(fn) if options.description is None else options.description
            ),
            input_schema=wire_schema,
            output_schema=(
                options.output_schema
                if options.output_schema is not None
                else self.output.schema
                if self.output is not None
                else None
            ),
            annotations=annotations,
            icons=msgspec.convert(options.icons, list[Icon]) if options.icons else None,
            meta=self.meta,
        )

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"

    async def call(self, raw_arguments: bytes, ctx: Context, pools: Pools) -> CallToolResult:
        """Validate, run and convert. Tool failures become ``isError`` results."""
        record = current_record() if TRACE.active else None
        started = clock() if record is not None else 0
        args: tuple[Any, ...] = ()
        kwargs: dict[str, Any] = _NO_KWARGS
        try:
            if self.positional is not None:  # only on the shorter path: see __init__
                args = astuple(self.positional.decode(raw_arguments or b"{}"))
            elif self.tensors:
                attachments = ctx.attachments
                attachment = RequestAttachment(
                    attachments.request if attachments else None,
                    shared=shared_memory_peer(ctx.client_capabilities.extensions) is not None,
                )
                kwargs = self.args.decode(raw_arguments, attachment)
            else:
                kwargs = self.decode(raw_arguments)
        except (msgspec.DecodeError, ValueError) as exc:  # pydantic's ValidationError too
            return self.invalid_arguments(exc)
        if record is not None:
            record.validate_ns = clock() - started
        if self.plain:
            try:
                value = await self.fn(*args, **kwargs)
            except (ProtocolError, InputRequired):
                raise
            except Exception as exc:
                return self.failed(exc)
            if type(value) is str:
                return CallToolResult(content=[TextContent(text=value)])
            return self.result(value, ctx)
        if self.header_params and ctx.headers is not None and is_modern(ctx.protocol_version or ""):
            # x-mcp-header mirroring is a 2026-07-28 rule: handshake-era clients never send it.
            check_param_headers(self.header_params, _json_arguments(raw_arguments), ctx.headers)
        if self.cached is not None:
            # functools.partial, not a lambda: a closure here would give every call of this
            # method (the plain path too) cells for self, ctx, pools and kwargs
            result = await self.cached.call(kwargs, ctx, partial(self._run, kwargs, ctx, pools))
        else:
            result = await self._run(kwargs, ctx, pools)
        if self.invalidates is not None:
            await self.invalidates.after(kwargs, result)
        return result

    async def _run(self, kwargs: dict[str, Any], ctx: Context, pools: Pools) -> CallToolResult:
        try:
            value = await self.invoke(kwargs, ctx, pools)
        except (ProtocolError, InputRequired):
            raise
        except Exception as exc:
            return self.failed(exc)
        return self.result(value, ctx)

    def invalid_arguments(self, exc: Exception) -> CallToolResult:
        """The error result of arguments that do not validate."""
        return error_result(f"Invalid arguments for tool {self.name!r}: {exc}")

    def failed(self, exc: Exception) -> CallToolResult:
        """The error result of a tool that raised ``exc``."""
        if isinstance(exc, ToolError):
            return error_result(str(exc))
        if isinstance(exc, TimeoutError) and self.timeout is not None:
            return error_result(f"Tool {self.name!r} timed out after {self.timeout} s")
        log.warning("tool %s raised %s", self.name, type(exc).__name__, exc_info=True)
        return error_result(f"Tool {self.name!r} failed: {exc}")

    def result(self, value: Any, ctx: Context) -> CallToolResult:
        """What the tool returned, as a result."""
        try:
            if self.tensors and is_tensor_result(value):
                return _tensor_result(value, ctx)
            return to_call_result(value, self.output, self.text_mirror)
        except (TypeError, ValueError) as exc:
            log.error("tool %s returned an unusable value: %s", self.name, exc)
            return error_result(f"Tool {self.name!r} returned a value that cannot be sent")


def _cache_bindings(
    fn: Callable[..., Any], name: str, options: ToolOptions, store: CacheStore | None
) -> tuple[CachedTool | None, Invalidates | None]:
    """``options.cache`` and ``options.invalidates`` bound to the server's store."""
    if options.cache is None and not options.invalidates:
        return None, None
    if store is None:
        raise ConfigurationError(f"{fn.__qualname__}: cache= and invalidates= need a cache store")
    parameters = tuple(inspect.signature(fn).parameters)
    cached = None if options.cache is None else CachedTool(store, options.cache, name, parameters)
    invalidates = (
        Invalidates(store, options.invalidates, name, parameters) if options.invalidates else None
    )
    return cached, invalidates


def _tensor_result(value: Any, ctx: Context) -> CallToolResult:
    """Tensors raw in the reply's attachment when the peer takes them, else base64 blobs."""
    attachments = ctx.attachments
    raw = (
        attachments is not None
        and attachments.can_reply
        and peer_accepts(ctx.client_capabilities.extensions)
    )
    shared = shared_memory_peer(ctx.client_capabilities.extensions) if raw else None
    content, attachment = encode_result(value, raw, shared)
    if attachments is not None:
        if attachment is not None:
            attachments.reply = attachment
        else:
            attachments.compressible = False  # base64 of binary numbers: compression gains little
    return CallToolResult(content=content)


def _header_params(
    schema: dict[str, Any], headers: dict[str, str], owner: str
) -> tuple[HeaderParam, ...]:
    """Mark ``headers`` (parameter -> header name) in the wire schema, then read back and
    check every ``x-mcp-header`` it carries. A verbatim ``input_schema`` without ``headers``
    is served as it is and its marks, if any, are not enforced (they are the author's)."""
    if not headers:
        return ()
    try:
        declare(schema, headers)
        return header_params(schema)
    except InvalidHeaderDeclaration as exc:
        raise InvalidHeaderDeclaration(f"{owner}: {exc}") from None


def _json_arguments(raw: bytes) -> Any:
    """The call's arguments as JSON values, for the ``Mcp-Param-*`` check (already decoded
    once, by the tool's own type: this runs only for tools that mirror headers)."""
    return msgspec.json.decode(raw) if raw else {}


def error_result(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=message)], is_error=True)


def to_call_result(
    value: Any, output: OutputModel | None, text_mirror: bool = True
) -> CallToolResult:
    """Turn what a tool returned into a ``CallToolResult``."""
    if isinstance(value, str):
        return CallToolResult(content=[TextContent(text=value)])
    if isinstance(value, CallToolResult):
        return value
    if output is not None:
        structured = output.structured(value)
        content: list[ContentBlock] = (
            [TextContent(text=encode(structured).decode())] if text_mirror else []
        )
        return CallToolResult(content=content, structured_content=structured)
    if isinstance(value, _CONTENT_TYPES):
        return CallToolResult(content=[value])
    if value is None:
        return CallToolResult(content=[])
    if isinstance(value, list | tuple) and all(
        isinstance(item, (str, *_CONTENT_TYPES)) for item in value
    ):
        return CallToolResult(
            content=[TextContent(text=i) if isinstance(i, str) else i for i in value]
        )
    if isinstance(value, bytes | bytearray | memoryview):
        raise TypeError("return content.embedded(...) or content.image(...) for bytes")
    data = msgspec.to_builtins(value)
    if isinstance(data, dict):
        mirror: list[ContentBlock] = (
            [TextContent(text=encode(data).decode())] if text_mirror else []
        )
        return CallToolResult(content=mirror, structured_content=data)
    return CallToolResult(content=[TextContent(text=encode(data).decode())])
