"""The application API for servers."""

from millimcp.server import content
from millimcp.server.config import ServerConfig
from millimcp.server.server import Server

__all__ = ["Server", "ServerConfig", "content"]
