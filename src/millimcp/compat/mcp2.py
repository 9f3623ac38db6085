"""The official SDK's ``MCPServer`` (mcp 2.x) on millimcp: change
``from mcp.server.mcpserver import MCPServer`` to
``from millimcp.compat.mcp2 import MCPServer``.

The 2.x differences: transport options are ``run()``/``streamable_http_app()`` keywords,
logging takes ``data``, and an unexpected exception's text is hidden from the client (only a
``ToolError``'s shows).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from millimcp.compat.app import CompatServer
from millimcp.compat.context import Context, ElicitationResult, ReadResourceContents
from millimcp.compat.errors import ResourceError, ToolError
from millimcp.compat.flavour import MCP2
from millimcp.compat.messages import AssistantMessage, Message, UserMessage
from millimcp.compat.results import Audio, Image
from millimcp.compat.running import Settings, TransportSecuritySettings
from millimcp.protocol.types import Icon

__all__ = [
    "AssistantMessage",
    "Audio",
    "Context",
    "ElicitationResult",
    "Icon",
    "Image",
    "MCPServer",
    "Message",
    "ReadResourceContents",
    "ResourceError",
    "Settings",
    "ToolError",
    "TransportSecuritySettings",
    "UserMessage",
]


class MCPServer(CompatServer):
    """``mcp.server.mcpserver.MCPServer``, served by millimcp."""

    flavour = MCP2

    def __init__(
        self,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: list[Any] | None = None,
        version: str = "",
        auth_server_provider: Any = None,
        token_verifier: Any = None,
        *,
        tools: list[Any] | None = None,
        lifespan: Callable[[Any], contextlib.AbstractAsyncContextManager[Any]] | None = None,
        debug: bool = False,
        log_level: str = "INFO",
        middleware: list[Any] | None = None,
        **_: Any,
    ) -> None:
        super().__init__(
            name,
            instructions,
            version=version or None,
            title=title,
            website_url=website_url,
            lifespan=lifespan,
            settings=Settings(debug=debug, log_level=log_level),
        )
        self.middleware.extend(middleware or ())
        for fn in tools or ():
            self.add_tool(fn)
