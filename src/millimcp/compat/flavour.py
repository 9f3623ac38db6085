"""What differs between the three FastMCP-family APIs, as one frozen value per flavour.

``MCP1`` is the official SDK's ``FastMCP`` (mcp 1.x), ``MCP2`` its ``MCPServer`` (mcp 2.x),
``FASTMCP`` PrefectHQ's ``fastmcp``. The registration adapter and the context read these
fields and nothing else, so a flavour is a few lines here, not a fork of the adapter.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FASTMCP", "MCP1", "MCP2", "Flavour"]


@dataclass(frozen=True, slots=True)
class Flavour:
    """The wire-visible habits of one API (each field names the behaviour it switches)."""

    name: str
    tool_error: str
    """Error text of a call whose tool raised ``ToolError(detail)``: ``{name}``, ``{detail}``."""
    crash_error: str
    """Error text of a call whose tool raised anything else (``{detail}``: its text)."""
    invalid_error: str
    """Error text of a call whose arguments failed validation."""
    pre_parse_json: bool = True
    """JSON inside string arguments is parsed first (mcp's ``pre_parse_json``)."""
    docstring_args: bool = False
    """The docstring's summary is the description and its ``Args:`` the parameter
    descriptions (fastmcp); else the raw ``__doc__`` is the description."""
    prune_titles: bool = False
    """Input schemas without pydantic's ``title`` keys, with ``additionalProperties: false``."""
    wrap_marker: bool = False
    """Wrapped ``{"result": ...}`` output schemas carry ``x-fastmcp-wrap-result``."""
    fastmcp_meta: bool = False
    """Titles from the name (``split_words`` -> ``Split Words``), ``_meta.fastmcp.tags`` on
    every definition, no description without a docstring, compact JSON text for non-text
    results (a list stays one block), the JSON-schema hint as a prompt argument's
    description."""
    validation_title: str | None = None
    """The title a validation error's text gives the arguments (``{fn}``: the function's
    name); None: pydantic's own (the arguments model's)."""
    log_data_keyword: str = "message"
    """The name of the logging methods' payload parameter (``message`` in 1.x and fastmcp,
    ``data`` in 2.x)."""
    default_name: str = "FastMCP"


MCP1 = Flavour(
    name="mcp1",
    tool_error="Error executing tool {name}: {detail}",
    crash_error="Error executing tool {name}: {detail}",
    invalid_error="Error executing tool {name}: {detail}",
)
MCP2 = Flavour(
    name="mcp2",
    tool_error="Error executing tool {name}: {detail}",
    crash_error="Error executing tool {name}",
    invalid_error="Error executing tool {name}: {detail}",
    log_data_keyword="data",
    default_name="mcp-server",
)
FASTMCP = Flavour(
    name="fastmcp",
    tool_error="{detail}",
    crash_error="Error calling tool {name!r}: {detail}",
    invalid_error="{detail}",
    validation_title="call[{fn}]",
    pre_parse_json=False,
    docstring_args=True,
    prune_titles=True,
    wrap_marker=True,
    fastmcp_meta=True,
)
