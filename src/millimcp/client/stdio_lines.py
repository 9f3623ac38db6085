"""Newline-delimited JSON-RPC from a server's stdout: lines, and the id of a line too long to
keep.

:class:`LineSplitter` cuts the byte stream into lines as it arrives and hands each complete
one on. A line longer than its limit is discarded as it streams in (never held whole): only
its first and last :data:`SALVAGE_BYTES` are kept, from which :func:`salvage_id` may read the
request id (``{"jsonrpc":"2.0","id":7,...`` or ``...,"id":7}``), so that the request waiting
for it can fail at once instead of at its deadline.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

import msgspec

__all__ = ["SALVAGE_BYTES", "LineSplitter", "salvage_id"]

SALVAGE_BYTES: Final = 256
"""How much of each end of a discarded line is kept."""
_ID = rb'(-?\d+|"(?:[^"\\]|\\.){0,200}")'
_ID_AT_START: Final = re.compile(
    rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID + rb"\s*[,}]"
)
_ID_AT_END: Final = re.compile(rb'"id"\s*:\s*' + _ID + rb"\s*\}\s*\Z")


def salvage_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of a discarded line, from its first and last bytes, when it shows plainly.

    Only a top-level id is read: the first key (after ``"jsonrpc"``) or the last one (a
    nested ``"id"`` at the end of a line is followed by more than one ``}``).
    """
    match = _ID_AT_START.match(head) or _ID_AT_END.search(tail)
    if match is None:
        return None
    try:
        found = msgspec.json.decode(match.group(1))
    except msgspec.DecodeError:
        return None
    return found if isinstance(found, int | str) else None


class LineSplitter:
    """Cuts a byte stream into lines: ``on_line(line)`` for each non-blank line of at most
    ``limit`` bytes (without its newline), ``on_oversized(head, tail)`` for each longer one."""

    __slots__ = ("_buffer", "_discarding", "_head", "_limit", "_on_line", "_on_oversized", "_tail")

    def __init__(
        self,
        limit: int,
        on_line: Callable[[bytes], None],
        on_oversized: Callable[[bytes, bytes], None],
    ) -> None:
        self._limit = limit
        self._on_line = on_line
        self._on_oversized = on_oversized
        self._buffer = bytearray()
        self._discarding = False
        self._head = b""
        self._tail = b""

    def feed(self, data: bytes) -> None:
        if self._discarding:
            end = data.find(b"\n")
            if end < 0:
                self._tail = (self._tail + data[-SALVAGE_BYTES:])[-SALVAGE_BYTES:]
                return
            self._tail = (self._tail + data[max(0, end - SALVAGE_BYTES) : end])[-SALVAGE_BYTES:]
            self._discarding = False
            self._on_oversized(self._head, self._tail)
            data = data[end + 1 :]
        buffer = self._buffer
        if not buffer and data.endswith(b"\n") and data.count(b"\n") == 1:
            line = data[:-1]
            if len(line) > self._limit:
                self._on_oversized(line[:SALVAGE_BYTES], line[-SALVAGE_BYTES:])
            elif line.strip():
                self._on_line(line)
            return
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            if end - start > self._limit:
                self._on_oversized(
                    bytes(buffer[start : start + SALVAGE_BYTES]),
                    bytes(buffer[max(start, end - SALVAGE_BYTES) : end]),
                )
            else:
                line = bytes(buffer[start:end])
                if line.strip():
                    self._on_line(line)
            start = end + 1
        del buffer[:start]
        if len(buffer) > self._limit:
            self._head = bytes(buffer[:SALVAGE_BYTES])
            self._tail = bytes(buffer[-SALVAGE_BYTES:])
            buffer.clear()
            self._discarding = True
