"""Peers' segments kept mapped between exchanges: reused while the name is the same file,
checked at every use (size, owner, mode, symlinks, a name freed and made again), dropped
when the name goes; a kept mapping touches no fresh page; /dev/shm left clean."""

from __future__ import annotations

import asyncio
import hashlib
import os
import resource
from collections.abc import Iterator

import pytest

from millimcp.errors import TensorFormatError
from millimcp.tensor.shm import DIRECTORY, Segment, available
from millimcp.tensor.shm_peers import PeerSegments

pytestmark = [
    pytest.mark.skipif(not available(), reason="no /dev/shm on this host"),
    pytest.mark.usefixtures("clean_dev_shm"),
]

MB4 = 4 << 20


@pytest.fixture
def peers() -> Iterator[PeerSegments]:
    kept = PeerSegments()
    yield kept
    kept.close()


def remake(name: str, size: int, fill: bytes) -> None:
    """Free ``name`` and make a new file under it (another inode), mode 0600."""
    os.unlink(os.path.join(DIRECTORY, name))
    fd = os.open(os.path.join(DIRECTORY, name), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size)
        os.pwrite(fd, fill, 0)
    finally:
        os.close(fd)


def faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_a_kept_mapping_is_reused_and_touches_no_fresh_page(peers: PeerSegments) -> None:
    with Segment.create(MB4) as owner:
        owner.view[:] = b"\x07" * MB4
        first = peers.attach(owner.name, MB4, max_bytes=MB4)
        hashlib.blake2b(first.view).digest()  # every page touched once through this mapping
        before = faults()
        again = peers.attach(owner.name, MB4, max_bytes=MB4)
        digest = hashlib.blake2b(again.view).digest()
        touched = faults() - before
        assert again is first
        assert digest == hashlib.blake2b(owner.view).digest()
        assert touched < 64, f"{touched} page faults reading a kept mapping (1,024 pages)"
        owner.view[0] = 9  # one memory: the owner's writes are seen in place
        assert again.view[0] == 9


def test_every_use_is_checked_as_forged_input(peers: PeerSegments) -> None:
    with Segment.create(4096) as owner:
        kept = peers.attach(owner.name, 4096, max_bytes=4096)
        with pytest.raises(TensorFormatError, match="holds 4096 bytes, the peer said 8192"):
            peers.attach(owner.name, 8192, max_bytes=1 << 20)
        with pytest.raises(TensorFormatError, match="more than 1024"):
            peers.attach(owner.name, 4096, max_bytes=1024)
        with pytest.raises(TensorFormatError, match="not a shared-memory segment name"):
            peers.attach("../" + owner.name, 4096, max_bytes=4096)
        assert peers.attach(owner.name, 4096, max_bytes=4096) is not kept  # remapped, checked
        os.chmod(os.path.join(DIRECTORY, owner.name), 0o644)
        with pytest.raises(TensorFormatError, match="open to other users"):
            peers.attach(owner.name, 4096, max_bytes=4096)
        os.chmod(os.path.join(DIRECTORY, owner.name), 0o600)


def test_a_name_freed_and_made_again_is_mapped_afresh(peers: PeerSegments) -> None:
    with Segment.create(4096) as owner:
        owner.view[:4] = b"old!"
        kept = peers.attach(owner.name, 4096, max_bytes=4096)
        remake(owner.name, 4096, b"new!")
        now = peers.attach(owner.name, 4096, max_bytes=4096)
        assert now is not kept
        assert bytes(now.view[:4]) == b"new!"  # the file the name is now, not a stale mapping


def test_a_symlink_planted_under_a_kept_name_is_refused(peers: PeerSegments) -> None:
    with Segment.create(4096) as owner, Segment.create(4096) as other:
        peers.attach(owner.name, 4096, max_bytes=4096)
        path = os.path.join(DIRECTORY, owner.name)
        os.unlink(path)
        os.symlink(os.path.join(DIRECTORY, other.name), path)
        with pytest.raises(TensorFormatError, match="cannot open"):
            peers.attach(owner.name, 4096, max_bytes=4096)
        os.unlink(path)


def test_mappings_of_freed_names_are_dropped_and_the_count_is_bounded() -> None:
    peers = PeerSegments(keep=2)
    try:
        segments = [Segment.create(4096) for _ in range(3)]
        for segment in segments:
            peers.attach(segment.name, 4096, max_bytes=4096)
        assert len(peers) == 2  # the least recently used went
        segments[2].close()  # the owner frees its name
        assert peers.prune() == [segments[2].name]
        assert len(peers) == 1
        for segment in segments[:2]:
            segment.close()
    finally:
        peers.close()
    assert len(peers) == 0


def test_a_timer_on_the_running_loop_drops_freed_names_without_another_use() -> None:
    peers = PeerSegments(every=0.05)

    async def main() -> int:
        with Segment.create(4096) as owner:
            peers.attach(owner.name, 4096, max_bytes=4096)
        for _ in range(400):  # the owner freed it: gone at the next prune (a loaded machine)
            await asyncio.sleep(0.05)
            if not len(peers):
                break
        return len(peers)

    try:
        assert asyncio.run(main()) == 0
    finally:
        peers.close()
