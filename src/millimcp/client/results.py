"""What the client hands back: a tool's result, a notification, the client's counters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from millimcp.protocol.types import ContentBlock, TextContent

__all__ = ["ClientStats", "Notification", "ToolResult"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The result of one ``tools/call``.

    ``is_error`` is the tool's own failure (``isError: true``): a result the model can read
    and correct, not an exception. Protocol failures raise instead.
    """

    content: list[ContentBlock]
    """The content blocks (``TextContent``, ``ImageContent``, ... from
    :mod:`millimcp.protocol.types`)."""
    structured_content: Any = None
    """``structuredContent``, decoded to builtins; None when the tool sent none."""
    is_error: bool = False
    meta: dict[str, Any] | None = None
    """The result's ``_meta``."""
    tensors: dict[str, Any] | None = None
    """Tensors that came with the result (``dev.millimcp/tensor``); filled by the tensor
    extension, None otherwise."""

    @property
    def text(self) -> str:
        """The text of the text blocks, joined by newlines (a convenience for logs and tests)."""
        return "\n".join(block.text for block in self.content if isinstance(block, TextContent))


@dataclass(frozen=True, slots=True)
class Notification:
    """A notification the server started (list changes, resource updates), from
    :meth:`~millimcp.client.Client.subscribe`."""

    method: str
    """``notifications/tools/list_changed``, ``notifications/resources/updated``, ..."""
    params: Any = None
    """The params decoded to builtins (``{"uri": ...}`` for a resource update), or None."""

    @property
    def uri(self) -> str | None:
        """The resource a ``notifications/resources/updated`` names."""
        params = self.params
        if isinstance(params, dict):
            uri = params.get("uri")
            return uri if isinstance(uri, str) else None
        return None


@dataclass(slots=True)
class ClientStats:
    """Counters of one client, read at any time (``client.stats``)."""

    calls: int = 0
    """Requests started by the application (a call's retries and MRTR rounds count once)."""
    retries: int = 0
    """Requests sent again after a retryable failure."""
    timeouts: int = 0
    """Calls that ended with :class:`~millimcp.errors.CallTimeout`."""
    connections_opened: int = 0
    """New HTTP connections (TCP handshakes)."""
    connections_reused: int = 0
    """Requests that went out on a kept-alive connection."""
