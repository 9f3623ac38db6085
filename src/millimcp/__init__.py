"""millimcp: a low-latency Model Context Protocol stack.

The curated public API. Names are loaded on first use (PEP 562), so that importing one room,
such as the sans-I/O ``millimcp.protocol``, does not drag in the server and asyncio.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from millimcp.cache import Cache, CacheConfig
    from millimcp.client import Client, ToolResult
    from millimcp.errors import ConfigurationError, MillimcpError, ProtocolError, ToolError
    from millimcp.resilience import Limits, Retry, Timeout
    from millimcp.server import Server, ServerConfig, content
    from millimcp.session import Context, InputRequired, SessionConfig
    from millimcp.transports.http import HttpConfig
    from millimcp.transports.stdio import StdioConfig

__all__ = [
    "Cache",
    "CacheConfig",
    "Client",
    "ConfigurationError",
    "Context",
    "HttpConfig",
    "InputRequired",
    "Limits",
    "MillimcpError",
    "ProtocolError",
    "Retry",
    "Server",
    "ServerConfig",
    "SessionConfig",
    "StdioConfig",
    "Timeout",
    "ToolError",
    "ToolResult",
    "content",
]

__version__ = "0.1.0"

_HOMES = {
    "Cache": "millimcp.cache",
    "CacheConfig": "millimcp.cache",
    "Client": "millimcp.client",
    "ToolResult": "millimcp.client",
    "ConfigurationError": "millimcp.errors",
    "MillimcpError": "millimcp.errors",
    "ProtocolError": "millimcp.errors",
    "ToolError": "millimcp.errors",
    "Server": "millimcp.server",
    "ServerConfig": "millimcp.server",
    "content": "millimcp.server",
    "Context": "millimcp.session",
    "InputRequired": "millimcp.session",
    "Limits": "millimcp.resilience",
    "Retry": "millimcp.resilience",
    "Timeout": "millimcp.resilience",
    "SessionConfig": "millimcp.session",
    "HttpConfig": "millimcp.transports.http",
    "StdioConfig": "millimcp.transports.stdio",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'millimcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
