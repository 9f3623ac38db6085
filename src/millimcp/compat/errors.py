"""The exceptions FastMCP-family tools raise, as branches of millimcp's one tree.

``ToolError`` is :class:`millimcp.errors.ToolError` itself; ``ResourceError`` and
``PromptError`` are ``ToolError``\\ s under the names the three APIs give them: a tool that
raises one gets an ``isError`` result whose text the flavour shows.
"""

from __future__ import annotations

from millimcp.errors import ToolError

__all__ = ["PromptError", "ResourceError", "ToolError"]


class ResourceError(ToolError):
    """A resource could not be read (``mcp.server.fastmcp.exceptions.ResourceError``)."""


class PromptError(ToolError):
    """A prompt could not be rendered (``fastmcp.exceptions.PromptError``)."""
