"""millimcp.codec.compress: Accept-Encoding negotiation, round trips, capped decompression."""

from __future__ import annotations

import gzip
import zlib

import pytest
import zstandard

from millimcp.codec.compress import available, compress, decompress, negotiate
from millimcp.errors import FrameTooLarge, RequestRejected

OFFERED = ("zstd", "gzip")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),  # no Accept-Encoding: identity
        (b"", None),
        (b"identity", None),
        (b"gzip", "gzip"),
        (b"x-gzip", "gzip"),
        (b"zstd", "zstd"),
        (b"gzip, deflate, br, zstd", "zstd"),  # httpx's default: zstd is preferred
        (b"GZIP , Zstd", "zstd"),
        (b"br", None),
        (b"*", "zstd"),
        (b"*;q=0", None),
        (b"zstd;q=0, *", "gzip"),
        (b"zstd;q=0.5, gzip;q=0.8", "gzip"),  # the client's q-values win
        (b"zstd;q=0.8, gzip;q=0.8", "zstd"),  # ties go to the server's preference
        (b"gzip;q=0.5, identity", None),  # identity is preferred over gzip
        (b"gzip;q=0.5, identity;q=0", "gzip"),
        (b"gzip;q=bogus, zstd;q=0", None),
        (b"gzip;level=1;q=0.2", "gzip"),
    ],
)
def test_negotiation(header: bytes | None, expected: str | None) -> None:
    assert negotiate(header, OFFERED) == expected


def test_negotiation_follows_the_servers_offer() -> None:
    assert negotiate(b"zstd, gzip", ("gzip",)) == "gzip"
    assert negotiate(b"zstd, gzip", ("gzip", "zstd")) == "gzip"
    assert negotiate(b"zstd, gzip", ()) is None


DATA = b'{"id": 1, "name": "item", "tags": ["a", "b"]}, ' * 2000


def test_round_trips_and_standard_formats() -> None:
    assert available("zstd")
    assert available("gzip")
    assert not available("br")
    assert gzip.decompress(compress(DATA, "gzip")) == DATA  # a standard gzip member
    assert zstandard.ZstdDecompressor().decompress(compress(DATA, "zstd")) == DATA
    assert len(compress(DATA, "zstd")) < len(DATA) // 10
    for coding in ("zstd", "gzip"):
        assert decompress(compress(DATA, coding), coding, len(DATA)) == DATA
    assert decompress(zlib.compress(DATA), "deflate", len(DATA)) == DATA
    assert decompress(gzip.compress(DATA), "x-gzip", len(DATA)) == DATA
    assert decompress(DATA, "identity", len(DATA)) == DATA
    two_members = gzip.compress(b"ab") + gzip.compress(b"cd")
    assert decompress(two_members, "gzip", 10) == b"abcd"
    two_frames = compress(b"ab", "zstd") + compress(b"cd", "zstd")
    assert decompress(two_frames, "zstd", 10) == b"abcd"


@pytest.mark.parametrize("coding", ["zstd", "gzip", "deflate"])
def test_a_zip_bomb_stops_at_the_cap(coding: str) -> None:
    zeros = b"\0" * (64 << 20)  # 64 MiB of zeros compress to a few KiB
    bomb = zlib.compress(zeros, 9) if coding == "deflate" else compress(zeros, coding)
    assert len(bomb) < 300_000
    with pytest.raises(FrameTooLarge):
        decompress(bomb, coding, 4 << 20)
    assert decompress(bomb[:0] + compress(b"x" * 100, "gzip"), "gzip", 100) == b"x" * 100


def test_bad_bodies_and_unknown_codings() -> None:
    with pytest.raises(RequestRejected) as unknown:
        decompress(DATA, "br", 1 << 20)
    assert unknown.value.status == 415
    with pytest.raises(RequestRejected) as stacked:
        decompress(DATA, "gzip, zstd", 1 << 20)
    assert stacked.value.status == 415
    for coding, body in (
        ("zstd", b"not zstd"),
        ("gzip", b"not gzip"),
        ("gzip", compress(DATA, "gzip")[:100]),  # truncated
    ):
        with pytest.raises(RequestRejected) as bad:
            decompress(body, coding, 1 << 20)
        assert bad.value.status == 400, coding
    with pytest.raises(FrameTooLarge):
        decompress(DATA, "identity", 10)
