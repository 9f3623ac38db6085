"""Shared-memory segments: zero-copy tensors between processes, forged names and sizes
refused, ownership and freeing, no leak when a process is killed; /dev/shm left clean."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from millimcp.errors import TensorFormatError
from millimcp.tensor import pack, unpack
from millimcp.tensor.shm import DIRECTORY, PREFIX, Segment, available, owner_of, sweep
from tests.conftest import shm_segments

pytestmark = [
    pytest.mark.skipif(not available(), reason="no /dev/shm on this host"),
    pytest.mark.usefixtures("clean_dev_shm"),
]


def test_a_tensor_written_by_one_process_is_read_in_place_by_another() -> None:
    array = np.arange(1 << 20, dtype=np.float32)
    packed = pack({"x": array})
    with Segment.create(packed.nbytes) as segment:
        packed.write_into(segment.view)
        reader = textwrap.dedent(f"""
            import numpy as np
            from millimcp.tensor import unpack
            from millimcp.tensor.shm import Segment
            segment = Segment.attach({segment.name!r}, {packed.nbytes}, max_bytes=1 << 23)
            x = unpack(segment.view, "numpy")["x"]
            assert x.shape == (1 << 20,) and float(x[12345]) == 12345.0
            x[0] = -1.0  # the same memory: the writer sees it
            del x
            segment.close()
        """)
        subprocess.run([sys.executable, "-c", reader], check=True, timeout=60)
        seen = unpack(segment.view, "numpy")["x"]
        assert seen[0] == -1.0
        assert seen[1] == 1.0
        del seen
    assert segment.name not in shm_segments()  # the owner freed it on close


@pytest.mark.parametrize(
    "name",
    [
        "../../etc/passwd",
        "/dev/shm/millimcp-1-" + "0" * 32,
        "millimcp-1-" + "0" * 31,
        "millimcp-1-" + "0" * 32 + "/x",
        "millimcp-0-" + "0" * 32,
        "millimcp-1-" + "G" * 32,
        "other-1-" + "0" * 32,
        "millimcp-1-" + "0" * 32 + "\x00",
        "",
        42,
    ],
)
def test_forged_names_are_refused_before_anything_is_opened(name: object) -> None:
    with pytest.raises(TensorFormatError, match="not a shared-memory segment name"):
        Segment.attach(name, 16, max_bytes=1 << 20)  # type: ignore[arg-type]


def test_forged_sizes_are_refused() -> None:
    with Segment.create(4096) as segment:
        for size in (4095, 4097, 1 << 30):
            with pytest.raises(TensorFormatError, match="4096 bytes, the peer said"):
                Segment.attach(segment.name, size, max_bytes=1 << 31)
        for size, match in ((0, "positive"), (-1, "positive"), (True, "positive")):
            with pytest.raises(TensorFormatError, match=match):
                Segment.attach(segment.name, size, max_bytes=1 << 20)
        with pytest.raises(TensorFormatError, match="more than 1024"):
            Segment.attach(segment.name, 4096, max_bytes=1024)
        with Segment.attach(segment.name, 4096, max_bytes=4096) as again:
            assert again.size == 4096
            assert not again.owned
        assert segment.name in shm_segments()  # a reader that does not own it leaves the name


def test_missing_symlinked_and_shared_files_are_refused() -> None:
    missing = f"{PREFIX}{os.getpid()}-{'a' * 32}"
    with pytest.raises(TensorFormatError, match="cannot open"):
        Segment.attach(missing, 16, max_bytes=1 << 20)
    link = os.path.join(DIRECTORY, f"{PREFIX}{os.getpid()}-{'b' * 32}")
    os.symlink("/etc/hostname", link)
    try:
        with pytest.raises(TensorFormatError, match="cannot open"):
            Segment.attach(os.path.basename(link), 16, max_bytes=1 << 20)
    finally:
        os.unlink(link)
    with Segment.create(64) as segment:
        os.chmod(os.path.join(DIRECTORY, segment.name), 0o644)
        with pytest.raises(TensorFormatError, match="open to other users"):
            Segment.attach(segment.name, 64, max_bytes=1 << 20)


def test_the_named_owner_claims_and_frees_a_segment_made_for_it() -> None:
    me = os.getpid()
    maker = textwrap.dedent(f"""
        from millimcp.tensor.shm import Segment
        segment = Segment.create(128, owner={me})
        segment.view[:5] = b"hello"
        print(segment.name, flush=True)
        segment.close()  # not the owner: the name stays for the reader
    """)
    name = subprocess.run(
        [sys.executable, "-c", maker], check=True, capture_output=True, text=True, timeout=60
    ).stdout.strip()
    assert owner_of(name) == me
    assert name in shm_segments()
    with Segment.attach(name, 128, max_bytes=1024, claim=True) as segment:
        assert name not in shm_segments()  # freed once mapped; the memory stays readable
        assert bytes(segment.view[:5]) == b"hello"
    with pytest.raises(TensorFormatError, match="owned by process 1,"):
        Segment.attach(f"{PREFIX}1-{'c' * 32}", 16, max_bytes=64, claim=True)


def test_a_killed_process_leaks_nothing_after_a_sweep() -> None:
    """The peer creates a segment, starts writing a tensor and is killed mid-exchange."""
    holder = textwrap.dedent("""
        import sys, time
        from millimcp.tensor.shm import Segment
        segment = Segment.create(1 << 22)
        segment.view[: 1 << 20] = bytes(1 << 20)
        print(segment.name, flush=True)
        time.sleep(600)
    """)
    with subprocess.Popen(
        [sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True
    ) as process:
        try:
            assert process.stdout is not None
            name = process.stdout.readline().strip()
            assert name in shm_segments()
            assert name not in sweep()  # its owner is alive: left alone
            assert name in shm_segments()
        finally:
            process.kill()
            process.wait(timeout=30)
    assert name in sweep()
    assert name not in shm_segments()


def test_a_pool_reuses_segments_only_once_nothing_views_them() -> None:
    from millimcp.tensor.shm import FILLED, FREE, HEADER_BYTES, SegmentPool, fill

    pool = SegmentPool(keep=1)
    try:
        array = np.arange(1000, dtype=np.float32)
        packed = pack({"x": array})
        first = pool.take(packed.nbytes)
        assert first.view[0] == FILLED
        assert fill(first, packed.parts) == packed.nbytes
        pool.give(first)
        assert first.view[0] == FREE
        assert pool.take(packed.nbytes) is first  # refilled, no new pages
        view = unpack(first.document(packed.nbytes), "numpy")["x"]
        np.testing.assert_array_equal(view, array)
        received = {first.name}
        pool.reclaim(received)
        assert received == {first.name}  # a tensor still views it: kept filled
        other = pool.take(packed.nbytes)  # the pool is full: a one-off segment
        assert other is not first
        assert other.size >= HEADER_BYTES + packed.nbytes
        pool.give(other)  # not pooled: closed and freed
        assert other.name not in shm_segments()
        del view
        pool.reclaim(received)
        assert received == set()
        assert first.view[0] == FREE
        assert pool.find(first.name) is first
        for bad in (0, True, first.size):
            with pytest.raises(TensorFormatError, match="document"):
                first.document(bad)
        pool.retire(first)  # a peer may still read it: never handed out again
        assert pool.find(first.name) is None
        assert pool.take(packed.nbytes) is not first
        assert first.name in shm_segments()
    finally:
        pool.close()
    assert first.name not in shm_segments()


def test_a_segment_is_viewed_while_anything_made_from_its_memory_lives() -> None:
    """Every way to hold the memory keeps the segment viewed (so a pool never refills it
    under a tensor): an array of a document, a slice of a slice, a memoryview of that, an
    array of the map itself, a torch tensor, a buffer of the view; each let go, it is not."""
    torch = pytest.importorskip("torch")
    segment = Segment.create(1 << 16)
    try:
        assert not segment.viewed()
        assert not segment.viewed()  # asking again changes nothing

        def array() -> object:
            return np.frombuffer(segment.document(1024), np.float32)

        def slice_of_slice() -> object:
            return segment.view[64:4096][8:16]

        def memoryview_of_slice() -> object:
            return memoryview(segment.document(100))

        def array_of_the_map() -> object:
            return np.frombuffer(segment._map, np.uint8)

        def tensor() -> object:
            return torch.from_numpy(np.frombuffer(segment.document(64), np.uint8))

        def buffer_of_the_view() -> object:
            return np.frombuffer(segment.view, np.uint8)

        for make in (
            array, slice_of_slice, memoryview_of_slice, array_of_the_map, tensor,
            buffer_of_the_view,
        ):  # fmt: skip
            held = make()
            assert segment.viewed(), make.__name__
            assert segment.viewed(), make.__name__
            del held
            assert not segment.viewed(), make.__name__
        segment.view[0] = 7  # the view is usable after each check
        assert segment.view[0] == 7
    finally:
        segment.close()
    assert segment.name not in shm_segments()


def test_a_pool_of_argument_segments_goes_by_the_control_byte_alone() -> None:
    """Only the peer reads an argument segment, so its pool skips the view check and goes by
    the control byte: filled until given back, free after."""
    from millimcp.tensor.shm import FILLED, FREE, SegmentPool

    pool = SegmentPool(keep=1, lent=False)
    try:
        first = pool.take(100)
        assert first.view[0] == FILLED
        written = np.frombuffer(first.view, np.uint8)  # a view of it here: not looked for
        other = pool.take(100)
        assert other is not first  # still filled: the peer may be reading it
        pool.give(other)  # a one-off: closed and freed
        pool.give(first)
        assert first.view[0] == FREE
        assert pool.take(100) is first
        del written
    finally:
        pool.close()
    assert first.name not in shm_segments()


def test_a_shared_memory_offer_is_read_defensively() -> None:
    from millimcp.tensor import EXTENSION
    from millimcp.tensor.extension import SharedPeer, shared_memory_peer
    from millimcp.tensor.shm import create_probe, verify_probe

    probe, token = create_probe()
    try:
        offer = {"probe": probe.name, "token": token}
        assert shared_memory_peer(None) is None
        assert shared_memory_peer({EXTENSION: "yes"}) is None
        assert shared_memory_peer({EXTENSION: {}}) is None
        assert (
            shared_memory_peer({EXTENSION: {"sharedMemory": {**offer, "token": "0" * 32}}}) is None
        )
        assert verify_probe(42, token) is None
        me = os.getpid()
        assert shared_memory_peer({EXTENSION: {"sharedMemory": offer}}) == SharedPeer(me)
        replies = {**offer, "replyTo": [probe.name, 7], "replyBytes": 1024}
        peer = shared_memory_peer({EXTENSION: {"sharedMemory": replies}})
        assert peer == SharedPeer(me, (probe.name,), 1024)
        others = f"{PREFIX}{me + 1}-{'a' * 32}"  # another process's segment: never written to
        mixed = [others, "../etc/passwd", {"a": 1}, probe.name]
        for _ in range(2):  # the second time from memory, the same answer
            peer = shared_memory_peer(
                {EXTENSION: {"sharedMemory": {**offer, "replyTo": mixed, "replyBytes": 64}}}
            )
            assert peer == SharedPeer(me, (probe.name,), 64)
            forged = {**offer, "token": "0" * 32, "replyTo": [probe.name], "replyBytes": 64}
            assert shared_memory_peer({EXTENSION: {"sharedMemory": forged}}) is None
    finally:
        probe.close()
