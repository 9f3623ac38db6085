"""The method table: what each method's params and result are, and how it is served.

One row per method a server answers, read by both sides. A server decodes ``params`` into
``MethodSpec.params`` only after the method is found here, and the HTTP binding reads
``name_field`` to check the ``Mcp-Name`` header. ``era`` says which era has the method:
``None`` for both, ``"modern"`` or ``"legacy"`` for one. A client (or the lab) reads a reply
with :func:`reply_decoder`: the method's result type, plus ``InputRequiredResult`` where
the method may answer with one (MRTR).
"""

from __future__ import annotations

import functools
from typing import Any, Final, Generic, Literal, NamedTuple, TypeVar

import msgspec

from millimcp.errors import ProtocolError
from millimcp.protocol.types import (
    CallToolParams,
    CallToolResult,
    CancelTaskParams,
    CompleteParams,
    CompleteResult,
    CreateTaskResult,
    DiscoverResult,
    EmptyResult,
    GetPromptParams,
    GetPromptResult,
    GetTaskParams,
    GetTaskResult,
    InitializeParams,
    InitializeResult,
    InputRequiredResult,
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
    SetLevelParams,
    SubscribeParams,
    UpdateTaskParams,
)

__all__ = ["LEGACY_ONLY", "METHODS", "MODERN_ONLY", "MethodSpec", "ReplyDecoder", "reply_decoder"]

T = TypeVar("T")


class MethodSpec(NamedTuple):
    params: type[Any]
    result: type[Any]
    name_field: str | None = None
    """The params attribute mirrored in the ``Mcp-Name`` header, if any (``task_id``: its
    wire name is the camelCase ``taskId``)."""
    input_required: bool = False
    """Whether the method may answer with an ``InputRequiredResult`` (MRTR)."""
    era: Literal["modern", "legacy"] | None = None
    """The only era that has the method; None when both have it."""


METHODS: Final[dict[str, MethodSpec]] = {
    "server/discover": MethodSpec(RequestParams, DiscoverResult, era="modern"),
    "tools/list": MethodSpec(PaginatedParams, ListToolsResult),
    "tools/call": MethodSpec(CallToolParams, CallToolResult, "name", input_required=True),
    "resources/list": MethodSpec(PaginatedParams, ListResourcesResult),
    "resources/templates/list": MethodSpec(PaginatedParams, ListResourceTemplatesResult),
    "resources/read": MethodSpec(ReadResourceParams, ReadResourceResult, "uri", True),
    "prompts/list": MethodSpec(PaginatedParams, ListPromptsResult),
    "prompts/get": MethodSpec(GetPromptParams, GetPromptResult, "name", input_required=True),
    "completion/complete": MethodSpec(CompleteParams, CompleteResult),
    "subscriptions/listen": MethodSpec(ListenParams, ListenResult, era="modern"),
    "initialize": MethodSpec(InitializeParams, InitializeResult, era="legacy"),
    "ping": MethodSpec(RequestParams, LegacyEmptyResult, era="legacy"),
    "logging/setLevel": MethodSpec(SetLevelParams, LegacyEmptyResult, era="legacy"),
    "resources/subscribe": MethodSpec(SubscribeParams, LegacyEmptyResult, era="legacy"),
    "resources/unsubscribe": MethodSpec(SubscribeParams, LegacyEmptyResult, era="legacy"),
    # the tasks extension (io.modelcontextprotocol/tasks); Mcp-Name carries the task id
    "tasks/get": MethodSpec(GetTaskParams, GetTaskResult, "task_id", era="modern"),
    "tasks/update": MethodSpec(UpdateTaskParams, EmptyResult, "task_id", era="modern"),
    "tasks/cancel": MethodSpec(CancelTaskParams, EmptyResult, "task_id", era="modern"),
}

MODERN_ONLY: Final = frozenset(m for m, spec in METHODS.items() if spec.era == "modern")
LEGACY_ONLY: Final = frozenset(m for m, spec in METHODS.items() if spec.era == "legacy")


class ReplyDecoder(Generic[T]):
    """How a reply's ``result`` is read: one type, plus ``input_required`` for MRTR methods
    (and ``task``: a ``CreateTaskResult``, for a call that declared the tasks extension).

    A result without ``resultType`` is complete (the spec's rule for older servers), and
    unknown fields are ignored, so one decoder reads servers of either era.
    """

    __slots__ = ("single", "union")

    def __init__(
        self, result: type[T], *, input_required: bool = False, task: bool = False
    ) -> None:
        self.single: msgspec.json.Decoder[T] = msgspec.json.Decoder(result)
        self.union: msgspec.json.Decoder[Any] | None = None
        if task:  # the tasks extension: a CreateTaskResult may come instead
            self.union = msgspec.json.Decoder(result | InputRequiredResult | CreateTaskResult)
        elif input_required:
            self.union = msgspec.json.Decoder(result | InputRequiredResult)

    def __repr__(self) -> str:
        return f"<ReplyDecoder {self.single.type!r} mrtr={self.union is not None}>"

    def decode(self, raw: bytes, modern: bool = True) -> T | InputRequiredResult:
        """The result; ``modern``: the reply may be an ``InputRequiredResult``.

        Raises :class:`~millimcp.errors.ProtocolError` for a result of the wrong shape.
        """
        try:
            if modern and self.union is not None:
                try:
                    return self.union.decode(raw)  # type: ignore[no-any-return]
                except msgspec.ValidationError:
                    pass  # no resultType: "complete"
            return self.single.decode(raw)
        except msgspec.DecodeError as exc:
            raise ProtocolError(f"the server sent an invalid result: {exc}") from None


@functools.cache
def reply_decoder(method: str) -> ReplyDecoder[Any]:
    """The decoder of ``method``'s replies (made once per method)."""
    spec = METHODS[method]
    return ReplyDecoder(spec.result, input_required=spec.input_required)
