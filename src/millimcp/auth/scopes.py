"""Scopes: space-separated strings (RFC 6749 §3.3), their union and the spec's choice.

The scope an MCP client asks for (MCP authorization §Scope Selection Strategy): the
challenge's ``scope``, else every ``scopes_supported`` of the protected resource, else none;
on step-up the union of what was asked before and what the new challenge names (SEP-2350).
``offline_access`` is added only when the authorization server lists it and the client wants
refresh tokens.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["format_scope", "parse_scope", "select_scopes", "union_scopes"]


def parse_scope(value: str | None) -> list[str]:
    """A scope string as a list, order kept, duplicates dropped."""
    return list(dict.fromkeys((value or "").split()))


def format_scope(scopes: Iterable[str]) -> str | None:
    """A list as a scope string; None when empty."""
    joined = " ".join(dict.fromkeys(scopes))
    return joined or None


def union_scopes(*groups: Iterable[str]) -> list[str]:
    """Every scope of every group, first appearance first."""
    return list(dict.fromkeys(scope for group in groups for scope in group))


def select_scopes(
    challenged: str | None,
    resource_supported: list[str] | None,
    *,
    previous: Iterable[str] = (),
    server_supported: list[str] | None = None,
    offline: bool = False,
) -> list[str]:
    """The scopes to request (see the module docstring)."""
    if challenged is not None and challenged.strip():
        base = parse_scope(challenged)
    elif resource_supported:
        base = [s for s in resource_supported if s != "offline_access"]
    else:
        base = []
    chosen = union_scopes(previous, base)
    if offline and server_supported and "offline_access" in server_supported and chosen:
        chosen = union_scopes(chosen, ["offline_access"])
    return chosen
