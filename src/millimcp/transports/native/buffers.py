"""How the native front holds a framed request's body (``dev.millimcp/tensor``) as it comes.

A framed body ends up in one writable buffer whose views back the request's tensors. Its
chunks are copied into that buffer as they arrive and let go at once (:func:`collect`), rather
than kept in a list and joined at the end: one buffer of the body's size is alive, not two.

What made the raw path slower on this front than under uvicorn was not the copying but the
pages: glibc serves a block at or above its mmap threshold with a fresh ``mmap``, every page
of which faults when first written (about 1.4 us a fault in the virtual machine the
benchmarks run on). The threshold starts at 128 KiB and only moves up when such a block is
freed, to that block's size, so that a block of the *same* size is mapped afresh again. Here
the largest blocks freed were the ~256 KiB chunks a socket read delivers (uvloop's, then
httptools'), so each chunk of a 4 MB body was a fresh mapping: about 1,400 minor faults per
request, 2 ms of a 5.6 ms round trip. :func:`settle_allocator` moves the threshold once, at
the front's start; measured after it, no faults per request.
"""

from __future__ import annotations

import functools
from typing import Final

__all__ = ["SETTLE_BYTES", "collect", "settle_allocator"]

SETTLE_BYTES: Final = 16 * 1024 * 1024
"""The block freed once at start: bodies, chunks and replies below this size come from the
heap, whose freed memory is reused (and kept, up to twice this size, rather than trimmed)."""


def collect(buffer: bytearray, end: int, chunk: bytes) -> None:
    """Put ``chunk``, the body's bytes up to ``end``, in its place at the end of ``buffer``."""
    start = end - len(chunk)
    if end <= len(buffer):
        buffer[start:end] = chunk
    else:
        buffer[start:] = chunk  # grows it (a buffer still collecting has no views)


@functools.cache
def settle_allocator() -> None:
    """Raise glibc's dynamic mmap threshold to :data:`SETTLE_BYTES` (``mallopt(3)``: freeing
    an mmapped block of at most 32 MiB moves the threshold up to its size), once per process.

    ``bytes(n)`` is calloc'd: a fresh mapping is zero already, so none of its pages is
    touched. Under another allocator this is one allocation freed, nothing more.
    """
    block = bytes(SETTLE_BYTES)
    del block
