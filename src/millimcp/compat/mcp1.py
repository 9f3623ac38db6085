"""The official SDK's ``FastMCP`` (mcp 1.x) on millimcp: change
``from mcp.server.fastmcp import FastMCP`` to ``from millimcp.compat.mcp1 import FastMCP``.

Settings (``host``, ``port``, ``streamable_http_path``, ``transport_security``...) are
constructor keywords or ``mcp.settings.x = ...``; ``run("stdio" | "streamable-http")``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from millimcp.compat.app import CompatServer
from millimcp.compat.context import Context, ElicitationResult, ReadResourceContents
from millimcp.compat.errors import ResourceError, ToolError
from millimcp.compat.flavour import MCP1
from millimcp.compat.messages import AssistantMessage, Message, UserMessage
from millimcp.compat.results import Audio, Image
from millimcp.compat.running import Settings, TransportSecuritySettings
from millimcp.protocol.types import Icon

__all__ = [
    "AssistantMessage",
    "Audio",
    "Context",
    "ElicitationResult",
    "FastMCP",
    "Icon",
    "Image",
    "Message",
    "ReadResourceContents",
    "ResourceError",
    "Settings",
    "ToolError",
    "TransportSecuritySettings",
    "UserMessage",
]


class FastMCP(CompatServer):
    """``mcp.server.fastmcp.FastMCP``, served by millimcp."""

    flavour = MCP1

    def __init__(
        self,
        name: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: list[Any] | None = None,
        auth_server_provider: Any = None,
        token_verifier: Any = None,
        event_store: Any = None,
        *,
        tools: list[Any] | None = None,
        lifespan: Callable[[Any], contextlib.AbstractAsyncContextManager[Any]] | None = None,
        **settings: Any,
    ) -> None:
        config = Settings()
        config.update(**settings)
        super().__init__(
            name, instructions, website_url=website_url, lifespan=lifespan, settings=config
        )
        for fn in tools or ():
            self.add_tool(fn)
