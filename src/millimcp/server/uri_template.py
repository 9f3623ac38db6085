"""RFC 6570 URI templates, for matching resource URIs against resource templates.

Supports the expressions MCP servers use: ``{var}`` (simple), ``{+var}`` (reserved),
``{#var}`` (fragment), ``{/var}`` (path segment), ``{.var}`` (label), and ``{?a,b}`` /
``{&a,b}`` (query). Matching is the inverse of expansion: each variable captures what its
operator may have produced, percent-decoded.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import parse_qsl, unquote

__all__ = ["UriTemplate"]

_EXPRESSION: Final = re.compile(r"\{([+#./?&]?)([A-Za-z0-9_.,%*]+)\}")
_VARNAME: Final = re.compile(r"[A-Za-z0-9_.%]+")


class UriTemplate:
    __slots__ = ("_groups", "_query_vars", "_regex", "template", "variables")

    def __init__(self, template: str) -> None:
        self.template = template
        self.variables: list[str] = []
        self._query_vars: list[str] = []
        self._groups: dict[str, str] = {}  # variable -> regex group name
        pattern: list[str] = []
        position = 0
        for match in _EXPRESSION.finditer(template):
            pattern.append(re.escape(template[position : match.start()]))
            position = match.end()
            operator, names = match.group(1), [n.rstrip("*") for n in match.group(2).split(",")]
            for name in names:
                if not _VARNAME.fullmatch(name):
                    raise ValueError(f"bad variable name {name!r} in {template!r}")
            if operator in ("?", "&"):
                self._query_vars.extend(names)
                self.variables.extend(names)
                pattern.append(r"(?:[?&](?P<_query>.*))?" if operator == "?" else r"(?:&.*)?")
                continue
            for index, name in enumerate(names):
                prefix = {"#": "#", "/": "/", ".": r"\."}.get(operator, "")
                if index > 0:
                    prefix = {"": ",", "+": ",", "#": ","}.get(operator, prefix)
                body = ".+?" if operator in ("+", "#") else "[^/?#&,]+?"
                pattern.append(re.escape(prefix) if prefix in ("#", ",") else prefix)
                if name in self._groups:  # a repeated variable must repeat its value
                    pattern.append(f"(?P={self._groups[name]})")
                    continue
                self._groups[name] = f"v{len(self._groups)}"
                pattern.append(f"(?P<{self._groups[name]}>{body})")
                self.variables.append(name)
        pattern.append(re.escape(template[position:]))
        self._regex = re.compile("".join(pattern) + r"\Z")

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` if it matches this template, else None."""
        found = self._regex.match(uri)
        if found is None:
            return None
        values: dict[str, str] = {}
        for name in self.variables:
            if name in self._query_vars:
                continue
            values[name] = unquote(found.group(self._groups[name]))
        if self._query_vars:
            query = found.groupdict().get("_query") or ""
            for key, value in parse_qsl(query, keep_blank_values=True):
                if key in self._query_vars:
                    values[key] = value
        return values
