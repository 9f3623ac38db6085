"""The prompt message classes of the FastMCP family (``prompts.base.Message`` and kin)."""

from __future__ import annotations

from typing import Any, Literal

from millimcp.protocol.types import TextContent

__all__ = ["AssistantMessage", "Message", "UserMessage"]


class Message:
    """One message of a prompt: ``role`` and ``content`` (text or a content block)."""

    def __init__(self, content: Any, role: Literal["user", "assistant"] = "user", **_: Any) -> None:
        self.role = role
        self.content = TextContent(text=content) if isinstance(content, str) else content

    def __repr__(self) -> str:
        return f"{type(self).__name__}(role={self.role!r}, content={self.content!r})"


class UserMessage(Message):
    def __init__(self, content: Any, role: Literal["user", "assistant"] = "user", **_: Any) -> None:
        super().__init__(content, role)


class AssistantMessage(Message):
    def __init__(
        self, content: Any, role: Literal["user", "assistant"] = "assistant", **_: Any
    ) -> None:
        super().__init__(content, role)
