"""The shared registration adapter: a user function becomes a millimcp tool, resource or
prompt with the flavour's schema, validation, result conversion and error text.

A tool registers a wrapper ``call(arguments, mctx)``: millimcp serves the flavour's input
schema verbatim and hands the decoded JSON arguments over as they are (``ToolOptions.
arguments``); the wrapper validates them with the flavour's pydantic model, builds the
flavour's ``Context``, runs the function (sync ones on the server's thread pool) and turns
what it returned or raised into a ``CallToolResult`` as the flavour would.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, Final

import msgspec
import pydantic

from millimcp.compat.context import Context, Host, bind, unbind
from millimcp.compat.errors import ResourceError, ToolError
from millimcp.compat.results import call_result, to_content, to_prompt_message
from millimcp.compat.signature import Arguments, Output, context_parameter, docstring
from millimcp.errors import ProtocolError
from millimcp.protocol.types import CallToolResult, TextContent
from millimcp.server.options import ToolOptions
from millimcp.session import Context as CoreContext
from millimcp.session import InputRequired

__all__ = ["ToolSpec", "prompt_handler", "resource_handler", "tool_options"]

log: Final = logging.getLogger("millimcp.compat")


def _raw_arguments(raw: bytes) -> dict[str, Any]:
    data = msgspec.json.decode(raw) if raw else {}
    if not isinstance(data, dict):
        raise ValueError("arguments must be an object")
    return {"arguments": data}


def plain(value: Any) -> Any:
    """A wire dict of a pydantic ``mcp.types`` object or a msgspec struct."""
    if value is None or isinstance(value, dict):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return msgspec.to_builtins(value)


class ToolSpec:
    """How one user function is called as a tool of ``server``'s flavour."""

    def __init__(
        self,
        server: Host,
        fn: Callable[..., Any],
        *,
        name: str | None,
        description: str | None,
        structured_output: bool | None,
        output_schema: dict[str, Any] | None = None,
    ) -> None:
        flavour = server.flavour
        self.server = server
        self.fn = fn
        self.name = name or fn.__name__
        if self.name == "<lambda>":
            raise ValueError("You must provide a name for lambda functions")
        self.context_param = context_parameter(fn, (Context,))
        self.description: str | None
        if flavour.docstring_args:
            summary, arg_docs = docstring(fn.__doc__)
            self.description = description or summary
        else:
            arg_docs = {}
            self.description = description or fn.__doc__ or ""
        self.args = Arguments(fn, flavour, skip=self.context_param, descriptions=arg_docs)
        self.output = Output.for_function(fn, flavour, structured_output)
        self.output_schema = (
            output_schema
            if output_schema is not None
            else self.output.schema
            if self.output is not None
            else None
        )
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - a callable object's async __call__
        )

    def _error(self, template: str, detail: object) -> CallToolResult:
        text = template.format(name=self.name, detail=detail)
        return CallToolResult(content=[TextContent(text=text)], is_error=True)

    async def __call__(self, arguments: dict[str, Any], mctx: CoreContext) -> CallToolResult:
        flavour = self.server.flavour
        try:
            kwargs = self.args.validate(arguments)
        except pydantic.ValidationError as exc:
            detail = str(exc)
            if flavour.validation_title is not None:  # fastmcp validates the call itself
                title = flavour.validation_title.format(fn=getattr(self.fn, "__name__", ""))
                detail = detail.replace(f" for {exc.title}\n", f" for {title}\n", 1)
            return self._error(flavour.invalid_error, detail)
        try:
            value = await invoke(
                self.server, self.fn, self.is_async, self.context_param, mctx, kwargs
            )
        except (ProtocolError, InputRequired):
            raise
        except (ToolError, ResourceError) as exc:
            return self._error(flavour.tool_error, exc)
        except Exception as exc:
            log.warning("tool %s raised %s", self.name, type(exc).__name__, exc_info=True)
            return self._error(flavour.crash_error, exc)
        try:
            return self.convert(value)
        except (TypeError, ValueError) as exc:
            log.warning("tool %s returned an unusable value: %s", self.name, exc)
            return self._error(flavour.crash_error, exc)

    def convert(self, value: Any) -> CallToolResult:
        result = call_result(value)
        if result is not None:
            return result
        content = to_content(value, self.server.flavour.fastmcp_meta)
        if self.output is None:
            return CallToolResult(content=content)
        return CallToolResult(content=content, structured_content=self.output.structured(value))


def tool_options(
    spec: ToolSpec,
    *,
    title: str | None,
    annotations: Any,
    icons: Any,
    meta: dict[str, Any] | None,
    timeout: float | None = None,
    tags: set[str] | None = None,
) -> ToolOptions:
    """The millimcp options that serve ``spec`` with the flavour's definition."""
    if spec.server.flavour.fastmcp_meta:  # given, else the annotations', else from the name
        given = plain(annotations)
        annotated = given.get("title") if isinstance(given, dict) else None
        title = title or annotated or fastmcp_title(spec.name)
        meta = fastmcp_meta(meta, tags)
    return ToolOptions(
        name=spec.name,
        title=title,
        description=spec.description,
        annotations=plain(annotations),
        icons=[plain(icon) for icon in icons] if icons else None,
        meta=meta,
        timeout=timeout,
        structured=False,
        input_schema=spec.args.schema,
        output_schema=spec.output_schema,
        arguments=_raw_arguments,
    )


def fastmcp_title(name: str) -> str:
    """fastmcp's title from a name: ``split_words`` -> ``Split Words``."""
    return name.replace("_", " ").replace("-", " ").title()


def fastmcp_meta(meta: dict[str, Any] | None, tags: set[str] | None) -> dict[str, Any]:
    """``_meta`` with fastmcp's ``{"fastmcp": {"tags": [...]}}``."""
    return {**(meta or {}), "fastmcp": {"tags": sorted(tags or ())}}


def _wrapper_signature(names: list[str]) -> inspect.Signature:
    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names]
    params.append(inspect.Parameter("mctx", inspect.Parameter.KEYWORD_ONLY, annotation=CoreContext))
    return inspect.Signature(params)


def resource_handler(server: Host, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A millimcp resource function over ``fn``: URI variables validated (lax) by its
    signature, the flavour's ``Context`` injected, the value as the SDK converts it."""
    context_param = context_parameter(fn, (Context,))
    args = Arguments(fn, server.flavour, skip=context_param)
    names = [n for n in inspect.signature(fn).parameters if n != context_param]
    is_async = inspect.iscoroutinefunction(fn)

    async def read(**variables: Any) -> Any:
        mctx: CoreContext = variables.pop("mctx")
        value = await invoke(server, fn, is_async, context_param, mctx, args.validate(variables))
        if isinstance(value, str | bytes):
            return value
        return _json_text(value)

    read.__signature__ = _wrapper_signature(names)  # type: ignore[attr-defined]
    read.__annotations__ = {"mctx": CoreContext}
    read.__doc__ = fn.__doc__
    return read


def _json_text(value: Any) -> str:
    import pydantic_core

    return pydantic_core.to_json(value, fallback=str, indent=2).decode()


def prompt_handler(
    server: Host, fn: Callable[..., Any]
) -> tuple[Callable[..., Any], dict[str, str]]:
    """A millimcp prompt function over ``fn`` and its arguments' descriptions."""
    context_param = context_parameter(fn, (Context,))
    args = Arguments(fn, server.flavour, skip=context_param)
    names = [n for n in inspect.signature(fn).parameters if n != context_param]
    properties = args.schema.get("properties", {})
    descriptions = {
        n: properties[n]["description"] for n in names if "description" in properties.get(n, {})
    }
    if server.flavour.fastmcp_meta:
        for n in names:
            if n not in descriptions:
                hint = {k: v for k, v in properties.get(n, {}).items() if k != "default"}
                text = msgspec.json.encode(hint).decode()
                descriptions[n] = (
                    f"Provide a value matching the following JSON schema: {text}. "
                    "Encode non-string values as JSON."
                )
    is_async = inspect.iscoroutinefunction(fn)

    async def render(**given: Any) -> Any:
        mctx: CoreContext = given.pop("mctx")
        value = await invoke(server, fn, is_async, context_param, mctx, args.validate(given))
        items = value if isinstance(value, list | tuple) else [value]
        return [to_prompt_message(item) for item in items]

    params = []
    for n in names:
        default = inspect.signature(fn).parameters[n].default
        params.append(inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=default))
    params.append(inspect.Parameter("mctx", inspect.Parameter.KEYWORD_ONLY, annotation=CoreContext))
    render.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    render.__annotations__ = {"mctx": CoreContext}
    return render, descriptions


def copy_context_call(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` bound to a copy of the caller's context variables (for a worker thread)."""
    return functools.partial(contextvars.copy_context().run, fn)


async def invoke(
    server: Host,
    fn: Callable[..., Any],
    is_async: bool,
    context_param: str | None,
    mctx: CoreContext,
    kwargs: dict[str, Any],
) -> Any:
    """Call the user's ``fn`` with validated ``kwargs``: the flavour's ``Context`` injected
    (as ``context_param``) and bound for ``get_context()``, a sync ``fn`` off the loop."""
    ctx: Context[Any] = Context(mctx, server)
    if context_param is not None:
        kwargs[context_param] = ctx
    token = bind(ctx)
    try:
        if is_async:
            return await fn(**kwargs)
        return await server.run_sync(functools.partial(fn, **kwargs))
    finally:
        unbind(token)
