"""``x-mcp-header``: which tool arguments a client mirrors into ``Mcp-Param-*`` headers.

The rules are the 2026-07-28 Streamable HTTP binding's: the value is a non-empty HTTP token,
unique among the tool's declarations ignoring case, on a property of type ``string``,
``integer`` or ``boolean`` reached from the schema root through ``properties`` keys only
(never through ``items``, ``oneOf``, ``$ref``, ``$defs``...). A tool that breaks any of them
is invalid as a whole and is left out of ``tools/list`` (:func:`header_params` raises
:class:`InvalidHeaderDeclaration`). Nothing here follows a ``$ref``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

from millimcp.protocol import encode_header_value

__all__ = ["HeaderParam", "InvalidHeaderDeclaration", "header_params", "param_headers"]

HeaderParam: TypeAlias = tuple[str, tuple[str, ...]]
"""(header name suffix, property path from the arguments object)."""

_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_PRIMITIVE: Final = frozenset({"string", "integer", "boolean"})
_MAX_DEPTH: Final = 64


class InvalidHeaderDeclaration(ValueError):
    """A tool's ``x-mcp-header`` declarations break the spec's rules."""


def header_params(schema: Mapping[str, Any]) -> tuple[HeaderParam, ...]:
    """The ``x-mcp-header`` declarations of an ``inputSchema``, checked.

    Raises :class:`InvalidHeaderDeclaration` naming the first rule broken.
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


def param_headers(params: tuple[HeaderParam, ...], arguments: Mapping[str, Any]) -> dict[str, str]:
    """``Mcp-Param-*`` headers for one call's arguments (absent or null values: no header)."""
    headers: dict[str, str] = {}
    for name, path in params:
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
            if value is None:
                break
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
