"""Servers written for the FastMCP family, served by millimcp.

``millimcp.compat.mcp1`` is the official SDK's ``FastMCP`` (mcp 1.x), ``millimcp.compat.mcp2``
its ``MCPServer`` (mcp 2.x), ``millimcp.compat.fastmcp`` PrefectHQ's ``fastmcp``: change the
import and the server runs on millimcp. ``python -m millimcp.compat run TARGET`` runs an
installed server unmodified (see :mod:`millimcp.compat.hook`). Needs ``millimcp[compat]``
(pydantic). Nothing else in millimcp imports this room.
"""

from millimcp.errors import MissingExtra

try:
    import pydantic  # noqa: F401 - every shim builds its schemas with it
except ImportError as exc:  # pragma: no cover - the test environment has the extra
    raise MissingExtra("compat", "millimcp.compat", exc.name) from exc
