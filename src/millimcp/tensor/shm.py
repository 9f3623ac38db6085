"""Shared-memory segments for same-host tensor exchange: created, checked, mapped and freed.

A segment is a file in ``/dev/shm`` (POSIX shared memory on Linux) that two processes of one
user map into their address spaces: a tensor document written there by one is read in place
by the other, with no socket and no copy beyond the writer's. This module holds the rules
that make that safe when the other process is a peer whose messages are untrusted input:

- **names**: ``millimcp-<pid>-<32 hex digits>``, nothing else. ``<pid>`` is the process
  that must free the segment; the hex digits are 128 random bits from :mod:`secrets`, so a
  name cannot be guessed. A name a peer sends is matched against that pattern (no ``/``, no
  ``..``, no other prefix: never a path), then opened relative to ``/dev/shm`` with
  ``O_NOFOLLOW`` (a symlink planted under a valid name is refused);
- **sizes**: the size a peer states must equal what ``fstat`` reports for the file (so a
  mapping never reaches past its end: no SIGBUS), must not exceed the caller's cap, and the
  file must be a regular file owned by this user with no access for anyone else;
- **ownership**: the creator owns a segment and frees it (``unlink``) when its exchange is
  over; :meth:`Segment.create` can name another process as the owner (the one that will read
  it), which then frees it once mapped (:meth:`Segment.attach` with ``claim=True``). A mapping
  outlives its name, so unlinking as soon as both sides have it mapped is always safe;
- **no leak when a process dies**: a segment's name carries its owner's pid, and
  :func:`sweep` removes every segment of this user whose owner is gone (each side sweeps when
  it starts and when it closes). A test kills a process mid-exchange and finds ``/dev/shm``
  clean after the sweep.

No numpy and no torch here: callers pack and unpack tensor documents in the mapped memory
with :mod:`millimcp.tensor.wire`.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import re
import secrets
import stat
import sys
import time
from typing import Final

from millimcp.errors import TensorFormatError

__all__ = [
    "DIRECTORY",
    "PREFIX",
    "SCHEME",
    "Segment",
    "available",
    "check_file",
    "check_reference",
    "create_probe",
    "segment_name",
    "stat_name",
    "sweep",
    "sweep_now_and_then",
    "verify_probe",
]

SCHEME: Final = "shm:"
"""The URI scheme of a tensor in a segment: ``shm:<segment name>#<tensor name>``."""
PROBE_BYTES: Final = 16

DIRECTORY: Final = "/dev/shm"
PREFIX: Final = "millimcp-"
_NAME: Final = re.compile(r"millimcp-([1-9][0-9]{0,9})-[0-9a-f]{32}")


def available() -> bool:
    """Whether this host has POSIX shared memory this process can write."""
    return os.path.isdir(DIRECTORY) and os.access(DIRECTORY, os.W_OK | os.X_OK)


def segment_name(owner: int | None = None) -> str:
    """A fresh, unguessable name for a segment that ``owner`` (default: this process) frees."""
    return f"{PREFIX}{owner or os.getpid()}-{secrets.token_hex(16)}"


def owner_of(name: str) -> int:
    """The pid in a valid segment name; a forged name raises TensorFormatError."""
    match = _NAME.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise TensorFormatError(f"not a shared-memory segment name: {name!r:.80}")
    return int(match.group(1))


class Segment:
    """One mapped segment: :attr:`view` is its memory; :meth:`close` unmaps, frees if owned."""

    __slots__ = ("_map", "identity", "name", "owned", "size", "view")

    def __init__(
        self,
        name: str,
        size: int,
        mapped: mmap.mmap,
        owned: bool,
        identity: tuple[int, int] = (0, 0),
    ) -> None:
        self.name = name
        self.size = size
        self.owned = owned
        """Whether this process frees the name (unlinks it) on close."""
        self.identity = identity
        """The file's (device, inode) when it was mapped: a name freed and made again is
        another file (see :mod:`millimcp.tensor.shm_peers`)."""
        self._map = mapped
        self.view = memoryview(mapped)

    def __repr__(self) -> str:
        return f"<Segment {self.name} {self.size} bytes{' owned' if self.owned else ''}>"

    @classmethod
    def create(cls, size: int, *, owner: int | None = None) -> Segment:
        """A new segment of ``size`` bytes, mapped read-write, mode 0600.

        ``owner`` (a pid, default this process) is the process that frees it: another pid
        hands the freeing to the peer that will read it (or to :func:`sweep` if it dies).
        """
        if size < 1:
            raise TensorFormatError("a shared-memory segment holds at least one byte")
        name = segment_name(owner)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=_directory())
        try:
            os.ftruncate(fd, size)
            mapped = mmap.mmap(fd, size)
            info = os.fstat(fd)
        except BaseException:
            os.close(fd)
            _unlink(name)
            raise
        os.close(fd)  # the mapping keeps the memory
        owned = owner in (None, os.getpid())
        return cls(name, size, mapped, owned, (info.st_dev, info.st_ino))

    @classmethod
    def attach(cls, name: str, size: int, *, max_bytes: int, claim: bool = False) -> Segment:
        """Map the segment a peer named, after checking the name, the file and the size.

        ``claim``: this process is the named owner and frees the segment now that it is
        mapped (the peer is done with the name). Anything forged raises TensorFormatError.
        """
        owner = check_reference(name, size, max_bytes)
        if claim and owner != os.getpid():
            raise TensorFormatError(f"segment {name} is owned by process {owner}, not this one")
        try:
            fd = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=_directory())
        except OSError as exc:
            raise TensorFormatError(f"cannot open shared-memory segment {name}: {exc}") from None
        try:
            info = os.fstat(fd)
            check_file(name, info, size)
            mapped = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        segment = cls(name, size, mapped, claim, (info.st_dev, info.st_ino))
        if claim:
            segment.unlink()
        return segment

    def viewed(self) -> bool:
        """Whether anything made from :attr:`view` (a tensor, a slice) still uses the memory.

        Every buffer of the map (a memoryview of it, and through it each slice, array and
        tensor) holds a reference to the map: once :attr:`view` is let go, the map is
        referenced by this segment alone when nothing uses its memory. No system call."""
        try:
            self.view.release()
        except BufferError:
            return True  # something holds a buffer of the view itself
        used = sys.getrefcount(self._map) > _MAP_HELD_ALONE
        self.view = memoryview(self._map)
        return used

    def document(self, nbytes: object) -> memoryview:
        """The tensor document a peer said fills ``nbytes`` after the control block."""
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 1:
            raise TensorFormatError(f"a segment's document size must be a positive int: {nbytes!r}")
        if HEADER_BYTES + nbytes > self.size:
            raise TensorFormatError(
                f"a {nbytes}-byte document does not fit segment {self.name} ({self.size} bytes)"
            )
        return self.view[HEADER_BYTES : HEADER_BYTES + nbytes]

    def unlink(self) -> None:
        """Free the name (idempotent); mappings stay valid until closed."""
        _unlink(self.name)

    def close(self) -> None:
        """Unmap (when no tensor still views the memory; else when the last one goes) and, if
        this process owns the segment, free its name."""
        if self.owned:
            self.unlink()
        with contextlib.suppress(BufferError):  # a tensor still views it: unmapped with it
            self.view.release()
            self._map.close()

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_MAP_HELD_ALONE: Final = 2
"""``sys.getrefcount`` of a segment's map that only the segment holds (and the call)."""


def check_reference(name: str, size: object, max_bytes: int) -> int:
    """The owner's pid of the segment a peer named with ``size`` bytes, once the name and the
    size (a positive int, at most ``max_bytes``) are checked; forged ones raise."""
    owner = owner_of(name)
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise TensorFormatError(f"shared-memory segment size must be a positive int: {size!r}")
    if size > max_bytes:
        raise TensorFormatError(f"shared-memory segment of {size} bytes: more than {max_bytes}")
    return owner


def check_file(name: str, info: os.stat_result, size: int) -> None:
    """Refuse a segment file that is not a regular file of this user, is open to others, or
    does not hold exactly the ``size`` bytes the peer said (no mapping past its end)."""
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        raise TensorFormatError(f"{name} is not a segment of this user")
    if info.st_mode & 0o077:
        raise TensorFormatError(f"{name} is open to other users")
    if info.st_size != size:
        raise TensorFormatError(f"segment {name} holds {info.st_size} bytes, the peer said {size}")


def stat_name(name: str) -> os.stat_result:
    """``lstat`` of a checked name relative to ``/dev/shm`` (no symlink followed)."""
    return os.stat(name, dir_fd=_directory(), follow_symlinks=False)


def sweep() -> list[str]:
    """Free the segments of this user whose owning process is gone; returns their names."""
    if not available():
        return []
    freed = []
    me = os.getuid()
    for entry in os.scandir(DIRECTORY):
        match = _NAME.fullmatch(entry.name)
        if match is None:
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != me:
                continue
        except FileNotFoundError:
            continue
        if not _alive(int(match.group(1))):
            _unlink(entry.name)
            freed.append(entry.name)
    return freed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


@functools.cache
def _directory() -> int:
    """``/dev/shm`` opened once: every name is resolved relative to it (``dir_fd``)."""
    return os.open(DIRECTORY, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _unlink(name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=_directory())


# -- proving one host: the client creates a probe segment, the server opens it ------------------


def create_probe() -> tuple[Segment, str]:
    """A small segment holding a random token, and the token (hex): a peer that can open the
    segment by name and read the same token shares this host and this user."""
    token = secrets.token_bytes(PROBE_BYTES)
    segment = Segment.create(PROBE_BYTES)
    segment.view[:] = token
    return segment, token.hex()


_VERIFIED: Final[dict[tuple[str, str], int | None]] = {}


def verify_probe(name: object, token: object) -> int | None:
    """The pid of a same-host peer whose probe segment ``name`` holds ``token``, else None
    (another host, a forged name, a wrong token). Answers are remembered (1,024 at most):
    a peer states its probe on every request, and a hit costs one dictionary look-up."""
    if not isinstance(name, str) or not isinstance(token, str):
        return None
    key = (name, token)
    try:
        return _VERIFIED[key]
    except KeyError:
        pass
    pid: int | None = None
    if available():
        try:
            with Segment.attach(name, PROBE_BYTES, max_bytes=PROBE_BYTES) as probe:
                if secrets.compare_digest(probe.view.hex(), token):
                    pid = owner_of(name)
        except TensorFormatError:
            pass
    if len(_VERIFIED) >= 1024:
        _VERIFIED.clear()
    _VERIFIED[key] = pid
    return pid


_last_sweep = [0.0]


def sweep_now_and_then(every: float = 1.0) -> None:
    """:func:`sweep`, at most once per ``every`` seconds (called on each exchange)."""
    now = time.monotonic()
    if now - _last_sweep[0] >= every:
        _last_sweep[0] = now
        sweep()


# -- reuse: fresh tmpfs pages cost far more than a copy, so segments are kept and refilled ------

HEADER_BYTES: Final = 64
"""A pooled segment starts with a control block: byte 0 is 0 while it is free, 1 once a
writer has filled it. The document follows, at this offset (aligned for any dtype)."""
FREE: Final = 0
FILLED: Final = 1


class SegmentPool:
    """Segments this process owns and reuses: taken when free, given back after an exchange.

    A segment is free when its control byte says so and no tensor of this process still
    views its memory (so results mapped in place stay valid as long as they are used). At
    most ``keep`` segments; closing the pool frees them all.
    """

    __slots__ = ("capacity", "keep", "lent", "retired", "segments")

    def __init__(self, keep: int = 4, capacity: int = 0, *, lent: bool = True) -> None:
        self.keep = keep
        self.lent = lent
        """Whether this process hands the segments' memory out (results mapped in place):
        then a segment is free only once nothing views it (:meth:`Segment.viewed`). A pool
        of argument segments, which only the peer reads, says False."""
        self.capacity = capacity
        """Bytes of each segment made up front by :meth:`reserve` (0: sized on demand)."""
        self.segments: list[Segment] = []
        self.retired: list[Segment] = []
        """Segments a peer may still read (never reused), freed at :meth:`close`."""

    def __repr__(self) -> str:
        return f"<SegmentPool {len(self.segments)} segments>"

    def retire(self, segment: Segment) -> None:
        """Never reuse ``segment``; free it when the pool closes."""
        self.segments = [kept for kept in self.segments if kept is not segment]
        self.retired.append(segment)

    def reserve(self) -> list[Segment]:
        """Make the pool's ``keep`` segments of ``capacity`` bytes now (marked free)."""
        while len(self.segments) < self.keep:
            segment = Segment.create(HEADER_BYTES + self.capacity)
            segment.view[0] = FREE
            self.segments.append(segment)
        return self.segments

    def take(self, size: int) -> Segment:
        """A free segment of at least ``HEADER_BYTES + size`` bytes, marked filled (made when
        none is free: kept if the pool has room, else one-off and ``owned`` as usual)."""
        for segment in self.segments:
            if segment.size < HEADER_BYTES + size or segment.view[0] != FREE:
                continue
            if not self.lent or not segment.viewed():
                segment.view[0] = FILLED
                return segment
        segment = Segment.create(HEADER_BYTES + max(size, 1 << 20))
        segment.view[0] = FILLED
        if len(self.segments) < self.keep:
            self.segments.append(segment)
        return segment

    def give(self, segment: Segment) -> None:
        """The exchange is over: free it for reuse (or close it if it is not pooled)."""
        for kept in self.segments:
            if kept is segment:
                segment.view[0] = FREE
                return
        segment.close()

    def find(self, name: str) -> Segment | None:
        for segment in self.segments:
            if segment.name == name:
                return segment
        return None

    def reclaim(self, names: set[str]) -> None:
        """Free the filled segments among ``names`` that nothing views any more (results
        this process received and no longer uses); they leave ``names``."""
        for segment in self.segments:
            if segment.name in names and _unused(segment, FILLED):
                segment.view[0] = FREE
                names.discard(segment.name)

    def close(self) -> None:
        segments, self.segments = [*self.segments, *self.retired], []
        self.retired = []
        for segment in segments:
            segment.close()


def _unused(segment: Segment, state: int = FREE) -> bool:
    """In ``state`` by its control byte, and no tensor of this process views its memory."""
    if segment.view[0] != state:
        return False
    return not segment.viewed()


def fill(segment: Segment, parts: list[object]) -> int:
    """Write a tensor document's parts after the control block; returns its bytes."""
    offset = HEADER_BYTES
    view = segment.view
    for part in parts:
        data = part if type(part) is bytes else memoryview(part).cast("B")  # type: ignore[arg-type]
        end = offset + len(data)
        view[offset:end] = data
        offset = end
    return offset - HEADER_BYTES
