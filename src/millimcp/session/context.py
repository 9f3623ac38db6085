"""The request context a handler receives: who asked, progress, logging, input from the client.

Input from the client (elicitation, sampling, roots) is one call for the handler in both
eras. In the handshake era it is a server-to-client request on the request's stream, and
the call returns the client's answer. In the modern era it follows the multi round-trip
pattern: when a handler asks for input it does not have yet, :class:`InputRequired`
unwinds the handler and the router answers with an ``InputRequiredResult`` whose sealed
``requestState`` remembers the answers gathered so far. When the client retries with the
answers, the handler runs again from the top and this time each ``await ctx.elicit(...)``
returns its answer. Handlers must therefore do their side effects after their input calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import msgspec

from millimcp.auth.resource import CURRENT_PRINCIPAL, Principal
from millimcp.errors import InvalidParams, MissingClientCapability
from millimcp.protocol import McpHeaders, encode_notification
from millimcp.protocol.types import (
    ClientCapabilities,
    CreateMessageParams,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitParams,
    ElicitRequest,
    ElicitResult,
    Implementation,
    InputRequest,
    ListRootsRequest,
    ListRootsResult,
    LoggingLevel,
    LoggingMessageParams,
    ModelPreferences,
    ProgressParams,
    RequestMeta,
    Root,
    SamplingMessage,
)

__all__ = ["AttachmentSource", "Attachments", "Context", "InputRequired"]

_LEVELS: Final[dict[str, int]] = {
    name: rank
    for rank, name in enumerate(
        ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
    )
}
_NO_CAPABILITIES: Final = ClientCapabilities()
_CAPABILITY_OF: Final = {
    ElicitRequest: "elicitation",
    CreateMessageRequest: "sampling",
    ListRootsRequest: "roots",
}

Emit = Callable[[bytes], Awaitable[None]]
Ask = Callable[[InputRequest], Awaitable[msgspec.Raw]]
AskMany = Callable[[dict[str, InputRequest]], Awaitable[dict[str, msgspec.Raw]]]


class AttachmentSource(Protocol):
    """Where a front's request attachment comes from, and whether its reply can carry one
    (the HTTP exchange of the request, seen through this narrow window)."""

    @property
    def attachment(self) -> memoryview | None:
        """The request's attachment, if it had one."""
        ...

    @property
    def streaming(self) -> bool:
        """Whether the reply turned into an event stream (no attachment can follow then)."""
        ...


class Attachments(msgspec.Struct, eq=False):
    """The binary side channel of one request (``dev.millimcp/tensor``), transport-neutral.

    The HTTP fronts provide it in both eras; on other transports ``Context.attachments`` is
    None (a tool then sends tensors as base64). A handler reads :attr:`request` and sets
    :attr:`reply` or :attr:`compressible`; the router puts them on the request's outcome.
    """

    _source: AttachmentSource
    reply: list[Any] | None = None
    """Buffers to send after the JSON reply, in the extension's framing (set by a handler)."""
    compressible: bool = True
    """False when the reply will not compress (base64 of binary numbers): sent as it is."""

    @property
    def request(self) -> memoryview | None:
        """The request's attachment (a writable view of the body, not copied), if it had one."""
        return self._source.attachment

    @property
    def can_reply(self) -> bool:
        """Whether the reply can still carry an attachment (it is not an event stream yet)."""
        return not self._source.streaming


class InputRequired(Exception):
    """Raised to end this round of a request and ask the client for input.

    Handlers may raise it themselves for full control (``requests`` and/or ``state``);
    the context's ``elicit``/``sample``/``list_roots`` raise it for them.
    """

    def __init__(self, requests: dict[str, InputRequest] | None = None, state: Any = None) -> None:
        super().__init__("input required")
        self.requests = requests
        self.state = state


class Context(msgspec.Struct, eq=False):
    """What a handler knows about the request it serves, and how it talks back.

    A struct, not a plain class: one is built per request and msgspec builds it in C.
    """

    request_id: int | str | None
    method: str
    meta: RequestMeta | None
    _emit: Emit | None = None
    _answers: dict[str, msgspec.Raw] | None = None
    state: Any = None
    """Opaque handler state carried across MRTR rounds (see :class:`InputRequired`)."""
    headers: McpHeaders | None = None
    """The MCP headers of the HTTP request (None on other transports)."""
    _seq: int = 0
    _ask: Ask | None = None
    """How to ask the client directly (handshake era); None: ask through MRTR."""
    session: Any = None
    """The handshake-era :class:`~millimcp.session.sessions.Session`; None when modern."""
    lifespan: Any = None
    """What the server's lifespan yielded (``Server(lifespan=...)``), for every handler."""
    _source: AttachmentSource | None = None
    """Set by the HTTP fronts; :attr:`attachments` is made from it on first use."""
    _attachments: Attachments | None = None
    _task_input: AskMany | None = None
    """Set while the request runs as a task (the tasks extension): input requests park the
    task until ``tasks/update`` answers them, all at once."""

    @property
    def attachments(self) -> Attachments | None:
        """Binary attachments of the request and its reply (HTTP, either era); None elsewhere.

        Made on first use: a request that never looks costs nothing.
        """
        attachments = self._attachments
        if attachments is None and self._source is not None:
            attachments = self._attachments = Attachments(self._source)
        return attachments

    @property
    def protocol_version(self) -> str | None:
        return self.meta.protocol_version if self.meta is not None else None

    @property
    def client_capabilities(self) -> ClientCapabilities:
        meta = self.meta
        if meta is None or meta.client_capabilities is None:
            return _NO_CAPABILITIES
        return meta.client_capabilities

    @property
    def client_info(self) -> Implementation | None:
        return self.meta.client_info if self.meta is not None else None

    @property
    def principal(self) -> Principal | None:
        """Who the request's access token speaks for (``Server(auth=...)``); None without
        auth, and over stdio."""
        return CURRENT_PRINCIPAL.get()

    @property
    def log_level(self) -> LoggingLevel | None:
        return self.meta.log_level if self.meta is not None else None

    @property
    def progress_token(self) -> int | str | None:
        return self.meta.progress_token if self.meta is not None else None

    def __repr__(self) -> str:
        return f"<Context {self.method} id={self.request_id!r}>"

    # -- notifications on this request's stream ------------------------------------------

    async def send_notification(self, method: str, params: Any = None) -> None:
        """Send a notification on this request's stream (opens SSE on the first one)."""
        if self._emit is not None:
            await self._emit(encode_notification(method, params))

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the client asked for progress on this request."""
        if self.progress_token is None or self._emit is None:
            return
        params = ProgressParams(
            progress_token=self.progress_token, progress=progress, total=total, message=message
        )
        await self._emit(encode_notification("notifications/progress", params))

    async def log(self, level: LoggingLevel, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` when the request asked for this level or lower."""
        wanted = self.log_level
        if wanted is None or self._emit is None or _LEVELS[level] < _LEVELS[wanted]:
            return
        params = LoggingMessageParams(level=level, data=data, logger=logger)
        await self._emit(encode_notification("notifications/message", params))

    async def debug(self, data: Any) -> None:
        await self.log("debug", data)

    async def info(self, data: Any) -> None:
        await self.log("info", data)

    async def warning(self, data: Any) -> None:
        await self.log("warning", data)

    async def error(self, data: Any) -> None:
        await self.log("error", data)

    # -- input from the client (MRTR) ----------------------------------------------------

    @property
    def answers(self) -> dict[str, msgspec.Raw]:
        """Every input answer received for this request so far, raw, by key."""
        if self._answers is None:
            self._answers = {}
        return self._answers

    def answer(self, key: str) -> msgspec.Raw | None:
        """The raw answer to input request ``key`` if the client has sent it."""
        return self.answers.get(key)

    async def request_input(self, requests: dict[str, InputRequest]) -> dict[str, msgspec.Raw]:
        """Ask for several inputs at once; returns their raw answers when all are present."""
        missing: dict[str, InputRequest] = {}
        answers = self.answers
        for key, request in requests.items():
            if key not in answers:
                capability = _CAPABILITY_OF[type(request)]
                if getattr(self.client_capabilities, capability) is None:
                    raise MissingClientCapability(
                        f"Missing required client capability: {capability}",
                        {"requiredCapabilities": {capability: {}}},
                    )
                missing[key] = request
        if missing:
            if self._task_input is not None:
                answers.update(await self._task_input(missing))
                return {key: answers[key] for key in requests}
            if self._ask is None:
                raise InputRequired(missing, self.state)
            for key, request in missing.items():
                answers[key] = await self._ask(request)
        return {key: answers[key] for key in requests}

    def _next_key(self, kind: str) -> str:
        self._seq += 1
        return f"{kind}-{self._seq}"

    async def elicit(
        self, message: str, schema: dict[str, Any], *, key: str | None = None
    ) -> ElicitResult:
        """Ask the user to fill in a form described by a (flat) JSON schema."""
        key = key or self._next_key("elicit")
        request = ElicitRequest(
            params=ElicitParams(message=message, mode="form", requested_schema=schema)
        )
        raw = (await self.request_input({key: request}))[key]
        answer: ElicitResult = _decode_answer(raw, ElicitResult, key)
        return answer

    async def sample(
        self,
        messages: list[SamplingMessage] | str,
        *,
        max_tokens: int = 256,
        system_prompt: str | None = None,
        temperature: float | None = None,
        model_preferences: ModelPreferences | None = None,
        key: str | None = None,
    ) -> CreateMessageResult:
        """Ask the client's model for a completion."""
        if isinstance(messages, str):
            messages = [SamplingMessage(role="user", content={"type": "text", "text": messages})]
        key = key or self._next_key("sample")
        request = CreateMessageRequest(
            params=CreateMessageParams(
                messages=messages,
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                temperature=temperature,
                model_preferences=model_preferences,
            )
        )
        raw = (await self.request_input({key: request}))[key]
        result: CreateMessageResult = _decode_answer(raw, CreateMessageResult, key)
        return result

    async def list_roots(self, *, key: str | None = None) -> list[Root]:
        """Ask the client for its roots."""
        key = key or self._next_key("roots")
        raw = (await self.request_input({key: ListRootsRequest()}))[key]
        roots: ListRootsResult = _decode_answer(raw, ListRootsResult, key)
        return roots.roots


def _decode_answer(raw: msgspec.Raw, type_: type[Any], key: str) -> Any:
    try:
        return msgspec.json.decode(raw, type=type_)
    except msgspec.DecodeError as exc:
        raise InvalidParams(f"Invalid params: inputResponses[{key!r}]: {exc}") from None
