"""The segments of same-host peers, kept mapped from one exchange to the next.

Mapping a segment is cheap; touching its memory through a *fresh* mapping is not: the first
write to each 4 KiB page through a mapping faults (reads fault 16 pages at a time), 977 minor
faults to write a 4 MB tensor, measured at 7 ms in the virtual machine these benchmarks run
on, where a copy of the same 4 MB takes under 1 ms. A server that mapped the client's
segments afresh on each call paid that on every call: most of the shared-memory round trip
(20 ms of it, against a trivial call of 3 ms). A client reuses its segments
call after call (:class:`millimcp.tensor.shm.SegmentPool`), so the server keeps its
mappings of them too, and a refill touches pages that are already mapped.

The rules of :meth:`Segment.attach <millimcp.tensor.shm.Segment.attach>` hold for every use,
not only the first:

- the name and the stated size are checked as forged input each time (pattern, positive
  int, the caller's cap) before the cache is even looked at;
- a kept mapping is used again only if one ``lstat`` of the name (relative to ``/dev/shm``,
  no symlink followed) finds it still a regular file of this user, open to no one else,
  holding exactly the stated size, and the *same file* (device and inode) that was mapped:
  a name freed and made again is mapped afresh, with every check of ``attach``;
- these names are never this process's to free: dropping a mapping only unmaps it (once no
  tensor views it any more);
- at most ``keep`` mappings (the least recently used goes first), and those whose name is
  gone (the peer freed it, or :func:`~millimcp.tensor.shm.sweep` did after the peer died)
  are dropped by :meth:`PeerSegments.prune`: on use at most once a second, and by a timer
  on the running event loop while any mapping is kept, so a freed segment's memory is not
  held by a stale mapping for long.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from typing import Final

from millimcp.errors import TensorFormatError
from millimcp.tensor.shm import Segment, check_file, check_reference, stat_name

__all__ = ["PEERS", "PeerSegments"]


class PeerSegments:
    """Mappings of segments other processes own, by name (see the module's rules)."""

    __slots__ = ("_lock", "_loop", "_maps", "_pruned", "_timer", "every", "keep")

    def __init__(self, keep: int = 32, every: float = 1.0) -> None:
        self.keep = keep
        self.every = every
        """Seconds between prunes."""
        self._maps: OrderedDict[str, Segment] = OrderedDict()
        self._lock = threading.Lock()
        self._pruned = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"<PeerSegments {len(self._maps)} mapped>"

    def __len__(self) -> int:
        return len(self._maps)

    def attach(self, name: str, size: object, *, max_bytes: int) -> Segment:
        """The segment ``name`` of ``size`` bytes, mapped: the kept mapping when the name still
        is the same file, else mapped afresh (:meth:`Segment.attach`). Never close it."""
        check_reference(name, size, max_bytes)
        assert isinstance(size, int)
        with self._lock:
            kept = self._maps.pop(name, None)  # out while checked: no other thread drops it
        if kept is not None and not self._still(kept, size):
            kept.close()
            kept = None
        segment = kept or Segment.attach(name, size, max_bytes=max_bytes)
        dropped = None
        with self._lock:
            maps = self._maps
            maps[name] = segment
            if len(maps) > self.keep:
                dropped = [maps.popitem(last=False)[1] for _ in range(len(maps) - self.keep)]
        if dropped:
            for old in dropped:
                old.close()
        if time.monotonic() - self._pruned >= self.every:
            self.prune()
        self._schedule()
        return segment

    @staticmethod
    def _still(segment: Segment, size: int) -> bool:
        """Whether the name is still the file that was mapped, of the stated size."""
        try:
            info = stat_name(segment.name)
            check_file(segment.name, info, size)
        except (OSError, TensorFormatError):
            return False
        return segment.size == size and (info.st_dev, info.st_ino) == segment.identity

    def prune(self) -> list[str]:
        """Drop the mappings whose name is gone or is another file now; returns their names."""
        self._pruned = time.monotonic()
        with self._lock:
            kept = list(self._maps.values())
        gone = [segment for segment in kept if not self._still(segment, segment.size)]
        with self._lock:
            for segment in gone:
                if self._maps.get(segment.name) is segment:
                    del self._maps[segment.name]
        for segment in gone:
            segment.close()
        return [segment.name for segment in gone]

    def _schedule(self) -> None:
        """Prune from the running loop in ``every`` seconds, and again while any is kept."""
        loop = self._loop
        if self._timer is not None and loop is not None and loop.is_running():
            return  # already due (a timer of a loop that has ended is forgotten)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a thread, a script): pruned on use
        if self._timer is not None and self._loop is loop:
            return
        self._loop = loop
        self._timer = loop.call_later(self.every, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.prune()
        if self._maps:
            self._schedule()

    def close(self) -> None:
        """Drop every mapping (and the timer)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        with self._lock:
            kept, self._maps = list(self._maps.values()), OrderedDict()
        for segment in kept:
            segment.close()


PEERS: Final = PeerSegments()
"""This process's mappings of its peers' segments."""
