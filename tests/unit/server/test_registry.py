"""millimcp.server.registry: entries by key, encoded ``*/list`` pages, cursors, change events."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from millimcp.errors import InvalidParams
from millimcp.server.registry import Registry, decode_cursor, encode_cursor


class Named(msgspec.Struct):
    name: str


class Entry:
    def __init__(self, name: str) -> None:
        self.definition = Named(name)


def registry(page_size: int = 2) -> tuple[Registry[Entry], list[str]]:
    changes: list[str] = []
    return Registry[Entry]("things", page_size, changes.append), changes


def names(page: list[msgspec.Raw]) -> list[str]:
    return [msgspec.json.decode(item, type=Named).name for item in page]


def all_pages(things: Registry[Any]) -> list[list[str]]:
    pages = []
    cursor: str | None = None
    while True:
        page, cursor = things.page(cursor)
        pages.append(names(page))
        if cursor is None:
            return pages


def test_pages_cover_every_entry_once_in_order() -> None:
    things, _ = registry()
    for name in "abcde":
        things.add(name, Entry(name))
    assert all_pages(things) == [["a", "b"], ["c", "d"], ["e"]]
    empty, _ = registry()
    assert all_pages(empty) == [[]]


def test_every_change_is_announced_and_shows_in_the_next_page() -> None:
    things, changes = registry(page_size=10)
    things.add("a", Entry("a"))
    things.add("b", Entry("b"))
    assert all_pages(things) == [["a", "b"]]
    things.add("a", Entry("a2"))  # replaced in place
    assert all_pages(things) == [["a2", "b"]]
    removed = things.remove("b")
    assert removed.definition.name == "b"
    assert all_pages(things) == [["a2"]]
    things.changed()
    assert changes == ["things"] * 5
    with pytest.raises(KeyError):
        things.remove("b")
    assert changes == ["things"] * 5  # nothing removed, nothing announced


def test_lookups() -> None:
    things, _ = registry()
    entry = Entry("a")
    things.add("a", entry)
    assert things.get("a") is entry
    assert things.get("b") is None
    assert "a" in things
    assert len(things) == 1
    assert bool(things)
    assert list(things) == [entry]
    assert things.entries == {"a": entry}


def test_the_encoded_page_is_reused_until_a_change() -> None:
    things, _ = registry(page_size=10)
    things.add("a", Entry("a"))
    first, _ = things.page(None)
    again, _ = things.page(None)
    assert first[0] is again[0]
    things.add("b", Entry("b"))
    after, _ = things.page(None)
    assert after[0] is not first[0]


@pytest.mark.parametrize("offset", [0, 1, 100, 10**12])
def test_cursors_round_trip(offset: int) -> None:
    assert decode_cursor(encode_cursor(offset)) == offset


@pytest.mark.parametrize("cursor", ["not-a-cursor", "", "eDox", "bzot", encode_cursor(5)[:-2], "é"])
def test_foreign_cursors_are_invalid_params(cursor: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        decode_cursor(cursor)
    assert caught.value.data == {"cursor": cursor}
