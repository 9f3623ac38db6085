"""Which protocol era a server speaks, as the 2026-07-28 versioning page says to find out.

A dual-era client tries the modern era first (``server/discover`` with the version in
``_meta`` and, over HTTP, in ``MCP-Protocol-Version``). A result, or a *recognized modern
error*, means a modern server; anything else (an HTTP 400/404/405 without such an error,
``-32601``, ``-32600``, ``-32000``, a ``-32022`` that lists no modern version, over stdio also
no answer in time) means a handshake-era server, and the client falls back to ``initialize``.

The answer is a property of the server, so it is remembered per server (the URL, or the
stdio command line) for the life of the process, and probed again when a remembered
assumption fails.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Literal, TypeAlias

from millimcp.errors import (
    HeaderMismatch,
    MissingClientCapability,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from millimcp.protocol import LEGACY_VERSIONS, MODERN_VERSIONS

__all__ = [
    "Era",
    "choose_version",
    "forget",
    "is_modern_error",
    "offered_versions",
    "remember",
    "remembered",
]

Era: TypeAlias = Literal["modern", "handshake"]

_ERAS: dict[str, tuple[Era, str]] = {}
"""server key -> (era, protocol version) found by the last probe."""
_MAX_REMEMBERED: Final = 1024


def remembered(key: str) -> tuple[Era, str] | None:
    return _ERAS.get(key)


def remember(key: str, era: Era, version: str) -> None:
    if len(_ERAS) >= _MAX_REMEMBERED and key not in _ERAS:
        _ERAS.clear()
    _ERAS[key] = (era, version)


def forget(key: str) -> None:
    _ERAS.pop(key, None)


def offered_versions(error: BaseException) -> list[str]:
    """The versions a ``-32022`` error lists in ``data.supported`` (empty when none)."""
    data: Any = getattr(error, "data", None)
    supported = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(supported, list):
        return []
    return [v for v in supported if isinstance(v, str)]


def choose_version(offered: Iterable[str], ours: Iterable[str]) -> str | None:
    """Our most preferred version among those offered."""
    offered = set(offered)
    for version in ours:
        if version in offered:
            return version
    return None


def is_modern_error(error: BaseException) -> bool:
    """Whether an error to a modern request shows that the server speaks the modern era.

    ``-32022`` counts only when it lists a modern version (a handshake-era server that checks
    versions lists its own); header and capability errors exist only in the modern era.
    """
    if isinstance(error, UnsupportedProtocolVersion):
        return any(v not in LEGACY_VERSIONS for v in offered_versions(error))
    return isinstance(error, HeaderMismatch | MissingClientCapability)


def modern_version_for(error: ProtocolError) -> str | None:
    """The modern version to retry with after ``-32022``, when the server lists one we speak."""
    return choose_version(offered_versions(error), MODERN_VERSIONS)
