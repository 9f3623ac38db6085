"""The ``Context`` a FastMCP-family tool asks for (``ctx: Context``), over millimcp's.

One class serves the three flavours: logging takes ``message`` (1.x, fastmcp) or ``data``
(2.x) positionally either way; ``request_context`` carries ``lifespan_context``,
``request_id``, ``meta`` and ``session``; ``session.create_message`` is sampling;
``elicit`` returns an object with ``action`` and ``data``. ``get_context()`` gives the
current one inside a call (fastmcp).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVarTuple

import msgspec

from millimcp.compat.flavour import Flavour
from millimcp.protocol.types import ResourceContents, SamplingMessage, TextResourceContents
from millimcp.session import Context as CoreContext

__all__ = ["Context", "ElicitationResult", "Host", "ReadResourceContents", "get_context"]


class Host(Protocol):
    """What a context and the adapter need of the compat server (``Host``)."""

    @property
    def flavour(self) -> Flavour: ...

    async def read_resource_contents(
        self, uri: str, ctx: CoreContext
    ) -> list[ResourceContents]: ...

    async def run_sync(self, call: Callable[[], Any]) -> Any: ...


Ts = TypeVarTuple("Ts")
LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]

_current: contextvars.ContextVar[Context[Any]] = contextvars.ContextVar("millimcp_compat_ctx")


def get_context() -> Context[Any]:
    """The context of the tool call running now (fastmcp's ``get_context()``)."""
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("No active context found.") from None


@dataclass(frozen=True, slots=True)
class ReadResourceContents:
    """One content of an in-process ``ctx.read_resource(uri)``."""

    content: str | bytes
    mime_type: str | None


@dataclass(frozen=True, slots=True)
class ElicitationResult:
    """What ``ctx.elicit`` returns: ``action`` is ``accept``, ``decline`` or ``cancel``;
    ``data`` the validated model (accept only), ``content`` the raw answer."""

    action: str
    data: Any = None
    content: dict[str, Any] | None = None


class _RequestContext:
    __slots__ = ("_core", "lifespan_context", "session")

    def __init__(self, core: CoreContext, session: _Session) -> None:
        self._core = core
        self.lifespan_context = core.lifespan
        self.session = session

    @property
    def request_id(self) -> int | str | None:
        return self._core.request_id

    @property
    def meta(self) -> Any:
        return self._core.meta

    @property
    def request(self) -> Any:
        """The HTTP request's headers (None on stdio)."""
        return self._core.headers


class _Session:
    """The part of the SDK's ``ServerSession`` tools use: sampling and notifications."""

    __slots__ = ("_core",)

    def __init__(self, core: CoreContext) -> None:
        self._core = core

    @property
    def client_params(self) -> Any:
        return self._core.client_info

    async def create_message(
        self,
        messages: list[Any],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        **_: Any,
    ) -> Any:
        converted: list[SamplingMessage] = [
            msgspec.convert(_dump(m), SamplingMessage) for m in messages if not isinstance(m, str)
        ]
        texts = [m for m in messages if isinstance(m, str)]
        return await self._core.sample(
            texts[0] if texts and not converted else converted,
            max_tokens=max_tokens,
            system_prompt=system_prompt,
            temperature=temperature,
        )

    async def send_log_message(self, level: LogLevel, data: Any, logger: str | None = None) -> None:
        await self._core.log(level, data, logger)

    async def send_progress_notification(
        self, progress_token: Any, progress: float, total: float | None = None, **_: Any
    ) -> None:
        await self._core.report_progress(progress, total)


class Context(Generic[*Ts]):
    """The request's context, as ``mcp.server.fastmcp.Context``, ``mcp.server.mcpserver.
    Context`` and ``fastmcp.Context`` have it (subscript it as they do)."""

    def __init__(self, core: CoreContext, server: Host | None = None) -> None:
        self._core = core
        self._server = server
        self._session = _Session(core)
        self._state: dict[str, Any] = {}

    # -- identity -------------------------------------------------------------------------

    @property
    def request_id(self) -> str:
        return str(self._core.request_id)

    @property
    def client_id(self) -> str | None:
        meta = self._core.meta
        extra = getattr(meta, "client_id", None) if meta is not None else None
        return extra if isinstance(extra, str) else None

    @property
    def session_id(self) -> str | None:
        return None

    @property
    def request_context(self) -> _RequestContext:
        return _RequestContext(self._core, self._session)

    @property
    def lifespan_context(self) -> Any:
        return self._core.lifespan

    @property
    def session(self) -> _Session:
        return self._session

    @property
    def fastmcp(self) -> Host | None:
        return self._server

    mcp_server = fastmcp

    # -- notifications ----------------------------------------------------------------------

    async def log(
        self,
        level: LogLevel,
        message: Any = None,
        *,
        logger_name: str | None = None,
        extra: dict[str, Any] | None = None,
        data: Any = None,
    ) -> None:
        payload = data if message is None else message
        if extra:
            payload = {"message": payload, **extra}
        await self._core.log(level, payload, logger_name)

    async def debug(self, message: Any = None, **extra: Any) -> None:
        await self._level("debug", message, extra)

    async def info(self, message: Any = None, **extra: Any) -> None:
        await self._level("info", message, extra)

    async def warning(self, message: Any = None, **extra: Any) -> None:
        await self._level("warning", message, extra)

    async def error(self, message: Any = None, **extra: Any) -> None:
        await self._level("error", message, extra)

    async def _level(self, level: LogLevel, message: Any, extra: dict[str, Any]) -> None:
        logger_name = extra.pop("logger_name", None)
        if message is None:
            message = extra.pop("data", None)
        await self.log(level, message, logger_name=logger_name, extra=extra or None)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        await self._core.report_progress(progress, total, message)

    # -- in-process reads, elicitation, sampling --------------------------------------------

    async def read_resource(self, uri: Any) -> list[ReadResourceContents]:
        if self._server is None:
            raise RuntimeError("no server to read resources from")
        contents = await self._server.read_resource_contents(str(uri), self._core)
        out: list[ReadResourceContents] = []
        for item in contents:
            if isinstance(item, TextResourceContents):
                out.append(ReadResourceContents(item.text, item.mime_type))
            else:
                import base64

                blob = getattr(item, "blob", "")
                out.append(ReadResourceContents(base64.b64decode(blob), item.mime_type))
        return out

    async def elicit(
        self, message: str, schema: Any = None, response_type: Any = None
    ) -> ElicitationResult:
        model = schema if schema is not None else response_type
        json_schema: dict[str, Any]
        if hasattr(model, "model_json_schema"):
            json_schema = model.model_json_schema()
        elif isinstance(model, dict):
            json_schema = model
        else:
            json_schema = {"type": "object", "properties": {}}
        answer = await self._core.elicit(message, json_schema)
        content = dict(answer.content) if answer.content else None
        data = None
        if answer.action == "accept" and hasattr(model, "model_validate"):
            data = model.model_validate(content or {})
        elif answer.action == "accept":
            data = content
        return ElicitationResult(answer.action, data, content)

    async def sample(self, messages: Any, *, max_tokens: int = 512, **options: Any) -> Any:
        """Sampling (fastmcp <= 3 ``ctx.sample``): the reply's text content."""
        result = await self._core.sample(
            messages, max_tokens=max_tokens, system_prompt=options.get("system_prompt")
        )
        return result.content

    # -- fastmcp state ----------------------------------------------------------------------

    def get_state(self, key: str) -> Any:
        return self._state.get(key)

    def set_state(self, key: str, value: Any) -> None:
        self._state[key] = value


def bind(ctx: Context[Any]) -> contextvars.Token[Context[Any]]:
    """Make ``ctx`` what ``get_context()`` returns in this task."""
    return _current.set(ctx)


def unbind(token: contextvars.Token[Context[Any]]) -> None:
    _current.reset(token)


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value
