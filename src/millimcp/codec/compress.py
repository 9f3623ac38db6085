"""HTTP content codings: negotiate, compress responses, decompress request bodies with a cap.

zstd (the ``zstandard`` package) is preferred: at the same speed it is smaller than gzip, and
much faster to decompress. gzip uses ``isal`` (Intel ISA-L's igzip, several times faster than
zlib) when installed, else the standard ``zlib``. Both optional packages come with the
``compress`` extra and are imported on first use; without ``zstandard`` the server offers
only gzip.

Compression pays above about 1 KiB: JSON shrinks by 70-90%, and on a slow link a 50 KB result
costs more time on the wire than the compression costs CPU (SEEDS S3.5). Decompression of a
request body is capped: a small "zip bomb" that would expand to gigabytes stops at the cap.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from typing import Any, Final

from millimcp.errors import FrameTooLarge, RequestRejected

__all__ = [
    "DECODABLE",
    "available",
    "compress",
    "decompress",
    "negotiate",
]

# Fast levels: a response is compressed while its caller waits. On a 58 KB tools/call
# response (benchmarks/compression.py data) zstd 1 gave 7.0 KB in 159 us where zstd 3 gave
# 7.1 KB in 209 us; isal 1 9.5 KB in 131 us (isal 2: same size, isal 3: 4x slower); zlib 1
# 10.1 KB in 434 us where zlib 6 gave 7.9 KB in 1,048 us.
ZSTD_LEVEL: Final = 1
ISAL_LEVEL: Final = 1
ZLIB_LEVEL: Final = 1
"""zlib's level for gzip when isal is absent."""
DECODABLE: Final = ("zstd", "gzip", "deflate")
"""Codings accepted on request bodies (``x-gzip`` is read as ``gzip``)."""

_ALIASES: Final = {"x-gzip": "gzip"}
_modules: dict[str, Any] = {}
_compressors: dict[str, Callable[[bytes], bytes]] = {}
_negotiated: dict[tuple[bytes, tuple[str, ...]], str | None] = {}


def _module(name: str) -> Any:
    """An optional module, imported once; None when it is not installed."""
    if name not in _modules:
        try:
            _modules[name] = importlib.import_module(name)
        except ImportError:
            _modules[name] = None
    return _modules[name]


def _gzip_module() -> Any:
    """``isal.isal_zlib`` when installed, else ``zlib`` (the same API)."""
    isal = _module("isal.isal_zlib")
    return zlib if isal is None else isal


def available(encoding: str) -> bool:
    """Whether this process can produce ``encoding`` (``zstd`` needs ``zstandard``)."""
    if encoding == "zstd":
        return _module("zstandard") is not None
    return encoding == "gzip"


def compress(data: bytes, encoding: str) -> bytes:
    """``data`` in ``encoding`` (``zstd`` or ``gzip``)."""
    compressor = _compressors.get(encoding)
    if compressor is None:
        compressor = _compressors[encoding] = _new_compressor(encoding)
    return compressor(data)


def _new_compressor(encoding: str) -> Callable[[bytes], bytes]:
    if encoding == "zstd":
        zstandard = _module("zstandard")
        if zstandard is None:
            raise ImportError("zstd needs the zstandard package: pip install 'millimcp[compress]'")
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress  # type: ignore[no-any-return]
    if encoding == "gzip":
        module = _gzip_module()
        level = ZLIB_LEVEL if module is zlib else ISAL_LEVEL

        def gzip(data: bytes) -> bytes:
            return module.compress(data, level, wbits=31)  # type: ignore[no-any-return]

        return gzip
    raise ValueError(f"cannot compress with {encoding!r}")


def decompress(data: bytes, encoding: str, limit: int) -> bytes:
    """Decode a request body; at most ``limit`` bytes come out.

    Raises :class:`FrameTooLarge` past ``limit`` (HTTP 413), :class:`RequestRejected` 415 for
    a coding not in :data:`DECODABLE`, 400 for data that is not valid in its coding.
    """
    coding = encoding.strip().lower()
    coding = _ALIASES.get(coding, coding)
    if coding in ("identity", ""):
        if len(data) > limit:
            raise FrameTooLarge(limit)
        return data
    if coding == "zstd":
        zstandard = _module("zstandard")
        if zstandard is not None:
            return _unzstd(zstandard, data, limit)
    elif coding in ("gzip", "deflate"):
        return _inflate(data, 31 if coding == "gzip" else 15, limit)
    raise RequestRejected(
        415, f"Unsupported Media Type: Content-Encoding {encoding!r} is not supported"
    )


def _unzstd(zstandard: Any, data: bytes, limit: int) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            chunk = reader.read(min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise FrameTooLarge(limit)
            chunks.append(chunk)
    except zstandard.ZstdError as exc:
        raise RequestRejected(400, f"Bad Request: invalid zstd body: {exc}") from None
    return b"".join(chunks)


def _inflate(data: bytes, wbits: int, limit: int) -> bytes:
    module = _gzip_module()
    chunks: list[bytes] = []
    size = 0
    rest = data
    try:
        while rest:  # gzip allows several members one after another
            inflater = module.decompressobj(wbits=wbits)
            chunk = inflater.decompress(rest, limit + 1 - size)
            size += len(chunk)
            if size > limit:
                raise FrameTooLarge(limit)
            if not inflater.eof:
                raise RequestRejected(400, "Bad Request: truncated compressed body")
            chunks.append(chunk)
            rest = inflater.unused_data if wbits == 31 else b""
    except module.error as exc:
        raise RequestRejected(400, f"Bad Request: invalid compressed body: {exc}") from None
    return b"".join(chunks)


def negotiate(accept_encoding: bytes | None, offered: tuple[str, ...]) -> str | None:
    """The coding to send for an ``Accept-Encoding`` value, or None for identity.

    ``offered`` is the server's codings in order of preference; those this process cannot
    produce are skipped. No header means identity. Highest q-value wins, ties go to the
    server's order; ``q=0`` refuses a coding; ``*`` stands for any coding not named; a coding
    is not used when the client names ``identity`` with a higher q-value. Memoized per header.
    """
    if accept_encoding is None or not offered:
        return None
    key = (accept_encoding, offered)
    if key in _negotiated:
        return _negotiated[key]
    choice = _choose(accept_encoding.decode("latin-1"), offered)
    if len(_negotiated) >= 256:
        _negotiated.clear()
    _negotiated[key] = choice
    return choice


def _choose(header: str, offered: tuple[str, ...]) -> str | None:
    weights: dict[str, float] = {}
    for item in header.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(1.0, max(0.0, float(value.strip())))
                except ValueError:
                    q = 0.0
        coding = _ALIASES.get(coding, coding)
        weights[coding] = max(q, weights.get(coding, 0.0))  # a coding named twice: best q
    star = weights.get("*")
    best: str | None = None
    best_q = 0.0
    for coding in offered:
        q = weights.get(coding, star if star is not None else 0.0)
        if q > best_q and available(coding):
            best, best_q = coding, q
    if best is None:
        return None
    identity_q = weights.get("identity", 0.0)  # weighs in only when the client names it
    return best if best_q >= identity_q else None
