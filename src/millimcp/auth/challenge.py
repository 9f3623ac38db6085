"""``WWW-Authenticate`` challenges (RFC 9110 §11.6.1, RFC 6750 §3): build and parse.

The parser reads every challenge of a header (``Bearer realm="a", error=x, DPoP ...``),
with quoted and bare (token) parameter values; only the ``Bearer`` one matters to MCP.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

__all__ = ["BearerChallenge", "bearer_challenge", "parse_bearer", "parse_challenges"]

_TOKEN: Final = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PARAM: Final = re.compile(rf'\s*({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}=*))\s*(?:,|$)')
_SCHEME: Final = re.compile(rf"\s*,?\s*({_TOKEN})(?:\s+|$|(?=,))")
_ESCAPE: Final = re.compile(r"\\(.)")


class BearerChallenge(NamedTuple):
    """The parameters of a ``Bearer`` challenge MCP reads (None when absent)."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def bearer_challenge(
    *,
    resource_metadata: str | None = None,
    scope: str | None = None,
    error: str | None = None,
    error_description: str | None = None,
) -> str:
    """A ``Bearer`` challenge with the parameters given, in a fixed order."""
    params = [
        (name, value)
        for name, value in (
            ("error", error),
            ("error_description", error_description),
            ("scope", scope),
            ("resource_metadata", resource_metadata),
        )
        if value is not None
    ]
    if not params:
        return "Bearer"
    return "Bearer " + ", ".join(f"{name}={_quote(value)}" for name, value in params)


def parse_challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    """Every challenge of a header: (scheme lower-cased, params with lower-cased names).

    Malformed input ends the parse (what was read so far is returned); a ``token68``
    credential is skipped.
    """
    challenges: list[tuple[str, dict[str, str]]] = []
    pos = 0
    while pos < len(header):
        scheme = _SCHEME.match(header, pos)
        if scheme is None:
            break
        params: dict[str, str] = {}
        challenges.append((scheme.group(1).lower(), params))
        pos = scheme.end()
        while pos < len(header):
            param = _PARAM.match(header, pos)
            if param is None:
                break
            name, quoted, bare = param.groups()
            value = _ESCAPE.sub(r"\1", quoted) if quoted is not None else bare
            params.setdefault(name.lower(), value)
            pos = param.end()
    return challenges


def parse_bearer(header: str | None) -> BearerChallenge | None:
    """The ``Bearer`` challenge of a ``WWW-Authenticate`` value; None if there is none."""
    if not header:
        return None
    for scheme, params in parse_challenges(header):
        if scheme == "bearer":
            return BearerChallenge(
                resource_metadata=params.get("resource_metadata"),
                scope=params.get("scope"),
                error=params.get("error"),
                error_description=params.get("error_description"),
            )
    return None
