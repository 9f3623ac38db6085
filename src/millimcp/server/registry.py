"""A registry of one kind of entry (tools, prompts, resources, templates) and its list pages.

Entries are kept by key (a name, a URI or a URI template) in registration order; replacing
an entry keeps its place. ``*/list`` pages hold each definition already encoded: the
encoding is done once per change of the registry, not once per list request. Every change
calls ``on_change(kind)`` (the server announces it: :mod:`millimcp.server.notify`).

A cursor is the URL-safe base64 of ``o:<offset>``: opaque to clients, stable across
processes (no per-process state), and rejected with -32602 when it is not one of ours.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from millimcp.errors import InvalidParams

__all__ = ["Entry", "Registry", "decode_cursor", "encode_cursor"]


class Entry(Protocol):
    """What a registry needs of an entry: its wire definition (a protocol struct)."""

    @property
    def definition(self) -> Any: ...


E = TypeVar("E", bound=Entry)


class Registry(Generic[E]):
    """Entries of one ``kind`` by key, with the encoded pages of their ``*/list`` method."""

    __slots__ = ("_encoded", "_on_change", "entries", "kind", "page_size")

    def __init__(self, kind: str, page_size: int, on_change: Callable[[str], None]) -> None:
        self.kind = kind
        self.page_size = page_size
        self.entries: dict[str, E] = {}
        """Key -> entry, for lookups on the request path (change it through :meth:`add` and
        :meth:`remove` only, which keep the pages and the listeners up to date)."""
        self._on_change = on_change
        self._encoded: list[msgspec.Raw] | None = None

    def __repr__(self) -> str:
        return f"<Registry {self.kind} entries={len(self.entries)}>"

    def __len__(self) -> int:
        return len(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __contains__(self, key: object) -> bool:
        return key in self.entries

    def __iter__(self) -> Iterator[E]:
        """The entries, in registration order."""
        return iter(tuple(self.entries.values()))

    def get(self, key: str) -> E | None:
        return self.entries.get(key)

    def add(self, key: str, entry: E) -> None:
        """Register ``entry`` under ``key``, replacing (in place) one already there."""
        self.entries[key] = entry
        self.changed()

    def remove(self, key: str) -> E:
        """Unregister and return the entry under ``key``; ``KeyError`` when there is none."""
        entry = self.entries.pop(key)
        self.changed()
        return entry

    def changed(self) -> None:
        """Drop the encoded definitions and announce that the list changed."""
        self._encoded = None
        self._on_change(self.kind)

    def page(self, cursor: str | None) -> tuple[list[msgspec.Raw], str | None]:
        """The definitions of one page, and the cursor of the next (None after the last)."""
        items = self._encoded
        if items is None:
            items = [msgspec.Raw(msgspec.json.encode(e.definition)) for e in self.entries.values()]
            self._encoded = items
        start = decode_cursor(cursor) if cursor else 0
        end = start + self.page_size
        return items[start:end], encode_cursor(end) if end < len(items) else None


def encode_cursor(offset: int) -> str:
    """The cursor of the page that starts at ``offset``."""
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode("ascii")


def decode_cursor(cursor: str) -> int:
    """The offset a cursor of :func:`encode_cursor` names; -32602 for anything else."""
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode()
        if text.startswith("o:") and text[2:].isdigit():
            return int(text[2:])
    except (ValueError, binascii.Error, UnicodeError):
        pass
    raise InvalidParams("Invalid params: unknown cursor", {"cursor": cursor})
