"""``x-mcp-header``: tool arguments mirrored into ``Mcp-Param-*`` HTTP headers (sans-I/O).

One rule set for both sides of the 2026-07-28 Streamable HTTP binding. A declaration is a
non-empty HTTP token, unique among the tool's declarations ignoring case, on a property of
type ``string``, ``integer`` or ``boolean`` reached from the schema root through
``properties`` keys only (never through ``items``, ``oneOf``, ``$ref``, ``$defs``...).

- The server marks parameters with :func:`declare` (``@server.tool(headers=...)``) or serves
  a schema that carries the marks, reads them back with :func:`header_params` (which refuses
  a tool that breaks a rule) and checks each call with :func:`check_param_headers`.
- The client reads the declarations of each listed tool with :func:`header_params` (a tool
  that breaks a rule is invalid as a whole and left out) and sends :func:`param_headers`.

Nothing here follows a ``$ref``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

from millimcp.errors import InvalidHeaderDeclaration
from millimcp.protocol.headers import McpHeaders, encode_header_value

__all__ = [
    "HeaderParam",
    "check_param_headers",
    "declare",
    "header_params",
    "param_headers",
    "value_at",
]

HeaderParam: TypeAlias = tuple[str, tuple[str, ...]]
"""(header name suffix, property path from the arguments object)."""

_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_PRIMITIVE: Final = frozenset({"string", "integer", "boolean"})
_MAX_DEPTH: Final = 64


def declare(schema: dict[str, Any], headers: Mapping[str, str]) -> None:
    """Mark top-level parameters of ``schema`` as mirrored: ``{parameter: header name}``.

    The marks are checked by :func:`header_params`, which the caller runs next.
    """
    properties = schema.get("properties", {})
    for param, header in headers.items():
        prop = properties.get(param)
        if not isinstance(prop, dict):
            raise InvalidHeaderDeclaration(f"no parameter {param!r} to mirror in a header")
        prop["x-mcp-header"] = header


def header_params(schema: Mapping[str, Any]) -> tuple[HeaderParam, ...]:
    """The ``x-mcp-header`` declarations of an ``inputSchema``, checked.

    Raises :class:`~millimcp.errors.InvalidHeaderDeclaration` naming the first rule broken.
    """
    found: list[HeaderParam] = []
    _walk(schema, (), found, 0)
    seen: set[str] = set()
    for name, _ in found:
        if name.lower() in seen:
            raise InvalidHeaderDeclaration(f"x-mcp-header {name!r} is declared twice")
        seen.add(name.lower())
    return tuple(found)


def _walk(node: Any, path: tuple[str, ...], found: list[HeaderParam], depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise InvalidHeaderDeclaration("the input schema nests too deeply")
    if isinstance(node, list):
        for item in node:
            _walk(item, (*path, "[]"), found, depth + 1)
        return
    if not isinstance(node, Mapping):
        return
    if "x-mcp-header" in node:
        found.append(_declaration(node, path))
    for key, value in node.items():
        if isinstance(value, Mapping | list):
            _walk(value, (*path, str(key)), found, depth + 1)


def _declaration(node: Mapping[str, Any], path: tuple[str, ...]) -> HeaderParam:
    name = node["x-mcp-header"]
    if not isinstance(name, str) or not _TOKEN.match(name):
        raise InvalidHeaderDeclaration(f"x-mcp-header {name!r} is not an HTTP token")
    if not path or len(path) % 2 or any(step != "properties" for step in path[::2]):
        where = "/".join(path) or "the schema root"
        raise InvalidHeaderDeclaration(
            f"x-mcp-header {name!r} is not on a property reachable through 'properties' "
            f"only (at {where})"
        )
    kind = node.get("type")
    kinds = set(kind) - {"null"} if isinstance(kind, list) else {kind}
    if not kinds or not kinds <= _PRIMITIVE:
        raise InvalidHeaderDeclaration(
            f"x-mcp-header {name!r} is on a property of type {kind!r}; only string, "
            "integer and boolean may be mirrored"
        )
    return name, path[1::2]


def value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    """The argument a declaration mirrors; None when it or a parent is absent or null."""
    value: Any = arguments
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
        if value is None:
            return None
    return value


def param_headers(params: tuple[HeaderParam, ...], arguments: Mapping[str, Any]) -> dict[str, str]:
    """``Mcp-Param-*`` headers for one call's arguments (absent or null values: no header)."""
    headers: dict[str, str] = {}
    for name, path in params:
        value = value_at(arguments, path)
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float | str):
            text = str(value)
        else:
            continue
        headers[f"Mcp-Param-{name}"] = encode_header_value(text)
    return headers


def check_param_headers(
    params: tuple[HeaderParam, ...], arguments: Mapping[str, Any], headers: McpHeaders
) -> None:
    """Check one call's ``Mcp-Param-*`` headers against its arguments (the JSON values).

    Raises :class:`~millimcp.errors.HeaderMismatch` (-32020) for a missing or different one.
    """
    for name, path in params:
        headers.check_param(name, value_at(arguments, path))
