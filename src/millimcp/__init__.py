"""millimcp: a low-latency Model Context Protocol stack.

The curated public API; everything else lives in its room (``millimcp.protocol``, ...).
"""

from millimcp.errors import (
    ConfigurationError,
    MillimcpError,
    ProtocolError,
    ToolError,
)
from millimcp.server import Server, ServerConfig, content
from millimcp.session import Context, InputRequired
from millimcp.transports.http import HttpConfig

__all__ = [
    "ConfigurationError",
    "Context",
    "HttpConfig",
    "InputRequired",
    "MillimcpError",
    "ProtocolError",
    "Server",
    "ServerConfig",
    "ToolError",
    "content",
]

__version__ = "0.1.0"
