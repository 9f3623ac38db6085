"""How one tool is registered: the options of ``@server.tool(...)`` as one frozen value."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from millimcp.cache import Cache
from millimcp.errors import ConfigurationError
from millimcp.protocol.types import InputRequest, ToolAnnotations
from millimcp.resilience import ConcurrencyLimit
from millimcp.tasks import TaskMode

__all__ = ["ToolOptions"]


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """Everything about a tool besides its function; every field has a working default.

    ``Server.tool(**keywords)`` builds one; a :class:`~millimcp.server.tools.ToolEntry` reads
    it once, at registration. Checked on construction (:class:`ConfigurationError`).
    """

    name: str | None = None
    """The tool's name; ``None``: the function's name."""
    title: str | None = None
    """A human-readable title for clients' menus."""
    description: str | None = None
    """``None``: the function's docstring."""
    annotations: ToolAnnotations | dict[str, Any] | None = None
    """Behaviour hints (``readOnlyHint``...), as the struct or its wire dict."""
    timeout: float | None = None
    """Seconds; enforced, and advertised in ``_meta["dev.millimcp/timeoutMs"]``. ``None``: the
    server's ``ServerConfig.tool_timeout_s``."""
    structured: bool | None = None
    """``False``: no ``outputSchema``/``structuredContent`` even for a typed return."""
    text_mirror: bool = True
    """Mirror ``structuredContent`` as JSON text content."""
    meta: dict[str, Any] | None = None
    """Extra ``_meta`` of the tool's definition."""
    headers: dict[str, str] | None = None
    """Parameter -> ``Mcp-Param-{name}`` header (``x-mcp-header``) that HTTP clients must send
    and the server checks against the arguments."""
    input_schema: dict[str, Any] | None = None
    """Served verbatim instead of the generated schema; the arguments are still decoded by
    the function's signature."""
    cache: Cache | None = None
    """Cache the tool's successful results (TTL, scope, key, tags)."""
    invalidates: Sequence[str] = ()
    """Cache tags, formatted from the arguments (``"orders:{user_id}"``), dropped after each
    successful call."""
    concurrency: ConcurrencyLimit | None = None
    """This tool's calls in flight and queued, besides the server's ``ServerConfig.limit``;
    beyond both, the call is refused with HTTP 503."""
    executor: Literal["thread", "process"] = "thread"
    """Where a sync function runs: the server's thread pool, or its process pool (a
    CPU-bound, module-level function that takes no ``Context``)."""
    scopes: Sequence[str] = ()
    """OAuth scopes a caller's token needs for this tool (``Server(auth=...)``), besides
    ``ProtectedResource.required_scopes``: without them, 403 ``insufficient_scope``."""
    task: TaskMode | None = None
    """Run a call as a task (the tasks extension): ``"optional"`` when the client negotiated
    the extension on the call, ``"required"`` always (-32021 for a client without it),
    ``"never"``; ``None``: the server's ``ServerConfig.tasks.default``."""
    ask_first: dict[str, InputRequest] | None = None
    """Input a task tool asks through MRTR on the call itself, before the task is created;
    the handler finds the answers under these keys (``ctx.elicit(..., key=...)``)."""
    output_schema: dict[str, Any] | None = None
    """Served verbatim as ``outputSchema`` (with ``structured=False``, the function returns
    its own ``CallToolResult``)."""
    icons: list[dict[str, Any]] | None = None
    """The tool's ``icons`` (wire dicts: ``src``, ``mimeType``, ``sizes``, ``theme``)."""
    arguments: Callable[[bytes], dict[str, Any]] | None = None
    """Decodes and validates the call's raw JSON ``arguments`` into keyword arguments, instead
    of the struct made from the signature (with ``input_schema``: another validator, such as
    a pydantic model). Raising ``ValueError`` gives the invalid-arguments error result."""

    def __post_init__(self) -> None:
        if self.executor not in ("thread", "process"):
            raise ConfigurationError(
                f"executor must be 'thread' or 'process', not {self.executor!r}"
            )
        if self.task not in (None, "never", "optional", "required"):
            raise ConfigurationError(
                f"task must be 'never', 'optional' or 'required', not {self.task!r}"
            )
        if self.ask_first and self.task in (None, "never"):
            raise ConfigurationError("ask_first= needs task='optional' or task='required'")
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigurationError(f"timeout must be positive seconds, not {self.timeout!r}")
