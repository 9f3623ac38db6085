"""Prompt entries: arguments from the signature, messages from the return value."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from millimcp.errors import InvalidParams
from millimcp.protocol.types import (
    AudioContent,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    Prompt,
    PromptArgument,
    PromptMessage,
    ResourceLink,
    TextContent,
)
from millimcp.server.offload import run_sync
from millimcp.session import Context

__all__ = ["PromptEntry"]

_BLOCKS = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)


class PromptEntry:
    __slots__ = ("context_param", "definition", "fn", "is_async", "name", "required")

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        argument_descriptions: dict[str, str] | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.is_async = inspect.iscoroutinefunction(fn)
        descriptions = argument_descriptions or {}
        arguments: list[PromptArgument] = []
        self.context_param: str | None = None
        self.required: list[str] = []
        for pname, param in inspect.signature(fn).parameters.items():
            if param.annotation in (Context, "Context"):
                self.context_param = pname
                continue
            required = param.default is param.empty
            if required:
                self.required.append(pname)
            arguments.append(
                PromptArgument(name=pname, description=descriptions.get(pname), required=required)
            )
        self.definition = Prompt(
            name=self.name,
            title=title,
            description=description or inspect.getdoc(fn),
            arguments=arguments or None,
        )

    def __repr__(self) -> str:
        return f"<Prompt {self.name}>"

    async def get(
        self, arguments: dict[str, str] | None, ctx: Context, executor: Executor | None
    ) -> GetPromptResult:
        arguments = arguments or {}
        missing = [name for name in self.required if name not in arguments]
        if missing:
            raise InvalidParams(
                f"Invalid params: prompt {self.name!r} needs argument(s) {', '.join(missing)}"
            )
        known = {a.name for a in self.definition.arguments or ()}
        kwargs: dict[str, Any] = {k: v for k, v in arguments.items() if k in known}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        if self.is_async:
            value = await self.fn(**kwargs)
        else:
            value = await run_sync(executor, self.fn, kwargs)
        return to_prompt_result(value, self.definition.description)


def to_prompt_result(value: Any, description: str | None) -> GetPromptResult:
    if isinstance(value, GetPromptResult):
        return value
    items = value if isinstance(value, list | tuple) else [value]
    messages: list[PromptMessage] = []
    for item in items:
        if isinstance(item, PromptMessage):
            messages.append(item)
        elif isinstance(item, str):
            messages.append(PromptMessage(role="user", content=TextContent(text=item)))
        elif isinstance(item, _BLOCKS):
            messages.append(PromptMessage(role="user", content=item))
        else:
            raise TypeError(f"a prompt cannot return {type(item).__name__}")
    return GetPromptResult(messages=messages, description=description)
