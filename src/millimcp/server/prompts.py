"""Prompt entries: arguments from the signature, messages from the return value."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from millimcp.errors import InvalidParams
from millimcp.protocol.types import (
    AudioContent,
    EmbeddedResource,
    GetPromptResult,
    Icon,
    ImageContent,
    Prompt,
    PromptArgument,
    PromptMessage,
    ResourceLink,
    TextContent,
)
from millimcp.server.invoke import Invoker, context_parameter
from millimcp.server.offload import Pools
from millimcp.session import Context

__all__ = ["PromptEntry"]

_BLOCKS = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)


class PromptEntry:
    """One prompt: its wire definition (arguments from the signature) and its function."""

    __slots__ = ("definition", "fn", "invoke", "known", "name", "required", "scopes")

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        argument_descriptions: dict[str, str] | None = None,
        meta: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        scopes: Sequence[str] = (),
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.scopes: tuple[str, ...] = tuple(scopes)
        """OAuth scopes a token needs to get it (``Server(auth=...)``), besides the required."""
        context_param = context_parameter(fn)
        self.invoke = Invoker(fn, context_param=context_param)
        descriptions = argument_descriptions or {}
        arguments: list[PromptArgument] = []
        self.required: list[str] = []
        for pname, param in inspect.signature(fn).parameters.items():
            if pname == context_param:
                continue
            required = param.default is param.empty
            if required:
                self.required.append(pname)
            arguments.append(
                PromptArgument(name=pname, description=descriptions.get(pname), required=required)
            )
        self.known = frozenset(a.name for a in arguments)
        self.definition = Prompt(
            name=self.name,
            title=title,
            description=inspect.getdoc(fn) if description is None else description,
            arguments=arguments or None,
            meta=meta,
            icons=msgspec.convert(icons, list[Icon]) if icons else None,
        )

    def __repr__(self) -> str:
        return f"<Prompt {self.name}>"

    async def get(
        self, arguments: dict[str, str] | None, ctx: Context, pools: Pools
    ) -> GetPromptResult:
        """Check the required arguments (-32602), run the function, convert its messages."""
        arguments = arguments or {}
        missing = [name for name in self.required if name not in arguments]
        if missing:
            raise InvalidParams(
                f"Invalid params: prompt {self.name!r} needs argument(s) {', '.join(missing)}"
            )
        kwargs: dict[str, Any] = {k: v for k, v in arguments.items() if k in self.known}
        value = await self.invoke(kwargs, ctx, pools)
        return to_prompt_result(value, self.definition.description)


def to_prompt_result(value: Any, description: str | None) -> GetPromptResult:
    """Turn what a prompt function returned (a result, messages, text or content blocks, or
    a list of them) into a ``GetPromptResult``; ``TypeError`` for anything else."""
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
