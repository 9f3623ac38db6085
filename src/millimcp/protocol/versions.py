"""Protocol revisions served, by era."""

from __future__ import annotations

from typing import Final

__all__ = [
    "LATEST_VERSION",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "SUPPORTED_VERSIONS",
    "is_modern",
    "negotiate_legacy",
]

MODERN_VERSIONS: Final = ("2026-07-28",)
"""Stateless revisions: version, identity and capabilities travel in every request."""

LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
"""Handshake revisions: an ``initialize`` request opens a session."""

SUPPORTED_VERSIONS: Final = MODERN_VERSIONS + LEGACY_VERSIONS
LATEST_VERSION: Final = MODERN_VERSIONS[0]


def is_modern(version: str) -> bool:
    return version in MODERN_VERSIONS


def negotiate_legacy(requested: str) -> str:
    """The handshake era's negotiation: the client's version if served, else our latest."""
    return requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
