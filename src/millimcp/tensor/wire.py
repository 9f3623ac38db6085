"""The tensor wire format: a safetensors document (one tensor or a dict of named tensors).

Layout, byte for byte the safetensors format::

    [8 bytes: N, unsigned little-endian]
    [N bytes: JSON header {name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}]
    [the data: each tensor's C-contiguous little-endian bytes, at its offsets]

The header may hold ``"__metadata__": {str: str}`` and may be padded with spaces. ``pack``
writes the header padded to a multiple of 8 and the tensors widest item first, so every
tensor starts aligned to its item size.

``unpack`` is strict and never allocates more than the bytes it was given: the header length,
the header itself, the number of tensors and dimensions and the data size all have caps
(:class:`TensorLimits`); each tensor's bytes must equal its shape times its item size; the
tensors must tile the data exactly (no overlap, no gap, no trailing bytes); dtypes come from an
allow-list; booleans must be 0 or 1. Anything else raises :class:`TensorFormatError`. The arrays
it returns are views of the buffer (``np.frombuffer``), not copies; torch tensors share that
memory through ``torch.from_numpy``, which needs a writable buffer (``bytearray``): a read-only
one (``bytes``) is copied once. No pickle anywhere.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

import msgspec

from millimcp.errors import TensorFormatError
from millimcp.tensor._imports import Kind, kind_of, load_numpy, load_torch

__all__ = [
    "DTYPES",
    "MEDIA_TYPE",
    "Packed",
    "TensorEntry",
    "TensorLimits",
    "pack",
    "read_header",
    "unpack",
]

MEDIA_TYPE: Final = "application/x-safetensors"

DTYPES: Final[dict[str, int]] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "I16": 2,
    "I32": 4,
    "I64": 8,
    "F16": 2,
    "BF16": 2,
    "F32": 4,
    "F64": 8,
}
"""The allowed dtypes (safetensors names) and their item sizes."""

_NUMPY: Final = {
    "BOOL": "|b1",
    "U8": "|u1",
    "I8": "|i1",
    "I16": "<i2",
    "I32": "<i4",
    "I64": "<i8",
    "F16": "<f2",
    "BF16": "<i2",  # numpy has no bfloat16: the bits travel as int16, torch views them
    "F32": "<f4",
    "F64": "<f8",
}
_FROM_NUMPY: Final = {
    ("b", 1): "BOOL",
    ("u", 1): "U8",
    ("i", 1): "I8",
    ("i", 2): "I16",
    ("i", 4): "I32",
    ("i", 8): "I64",
    ("f", 2): "F16",
    ("f", 4): "F32",
    ("f", 8): "F64",
}
_TORCH: Final = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "I16": "int16",
    "I32": "int32",
    "I64": "int64",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
}
_FROM_TORCH: Final = {name: code for code, name in _TORCH.items()}
_METADATA: Final = "__metadata__"
_PAD: Final = 8

_Count = Annotated[int, msgspec.Meta(ge=0)]


class _Info(msgspec.Struct, forbid_unknown_fields=True):
    dtype: str
    shape: list[_Count]
    data_offsets: tuple[_Count, _Count]


_HEADER: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])
_INFO: Final = msgspec.json.Decoder(_Info)
_META: Final = msgspec.json.Decoder(dict[str, str])


@dataclass(frozen=True, slots=True)
class TensorLimits:
    """Caps checked before anything is allocated. The defaults suit a model server."""

    max_bytes: int = 1 << 30
    """Data bytes of one document."""
    max_header_bytes: int = 1 << 20
    max_tensors: int = 4096
    max_ndim: int = 32
    max_name_chars: int = 256


DEFAULT_LIMITS: Final = TensorLimits()


@dataclass(frozen=True, slots=True)
class TensorEntry:
    """One tensor of a document's header; ``begin``/``end`` are offsets into the data."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


class Packed:
    """An encoded document as a list of buffers (header first), to send without joining."""

    __slots__ = ("entries", "nbytes", "parts")

    def __init__(self, parts: list[Any], entries: list[TensorEntry]) -> None:
        self.parts = parts
        self.entries = entries
        self.nbytes = sum(map(len, parts))

    def __repr__(self) -> str:
        return f"<Packed tensors={len(self.entries)} bytes={self.nbytes}>"

    def tobytes(self) -> bytes:
        return b"".join(self.parts)

    def write_into(self, target: memoryview) -> int:
        """Copy the document into ``target`` (a writable byte buffer, such as a shared-memory
        segment): one copy per part, none joined first. Returns the bytes written."""
        if len(target) < self.nbytes:
            raise TensorFormatError(f"{len(target)}-byte buffer for a {self.nbytes}-byte document")
        offset = 0
        for part in self.parts:
            view = memoryview(part).cast("B") if not isinstance(part, bytes) else part
            end = offset + len(view)
            target[offset:end] = view
            offset = end
        return offset


def pack(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> Packed:
    """Encode named numpy arrays and/or torch tensors (any layout, any byte order, any device).

    Non-contiguous input is packed, big-endian input converted, CUDA tensors copied to the
    host; C-contiguous little-endian arrays are not copied (their memory is one of the parts).
    The header of each (names, dtypes, shapes) is encoded once and kept (see :data:`KEPT`).
    """
    items: list[tuple[str, str, tuple[int, ...], Any]] = []
    for name, value in tensors.items():
        if not isinstance(name, str) or not name or name == _METADATA:
            raise TensorFormatError(f"invalid tensor name {name!r}")
        code, flat = _host_bytes(name, value)
        items.append((name, code, tuple(map(int, value.shape)), flat))
    key = None if metadata else tuple(item[:3] for item in items)
    known = None if key is None else _PACKED.get(key)
    if known is None:
        known = _encode_header(items, metadata)
        if key is not None:
            _keep(_PACKED, key, known)
    head, entries, order = known
    return Packed([head, *(items[i][3] for i in order if len(items[i][3]))], [*entries])


KEPT: Final = 256
"""Headers kept, encoded (:func:`pack`) and checked (:func:`read_header`): a model server
sees the same few shapes call after call, so neither encodes nor validates the same header
twice. Both caches are pure functions of their keys (the header's bytes, the data's size and
the limits for a read), so a forged header is checked like any other the first time and
refused every time; each cache is emptied when it reaches this many entries."""
_PACKED: Final[dict[Any, tuple[bytes, tuple[TensorEntry, ...], tuple[int, ...]]]] = {}
_READ: Final[dict[Any, tuple[tuple[TensorEntry, ...], dict[str, str] | None]]] = {}
_KEPT_HEADER_BYTES: Final = 4096


def _keep(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= KEPT:
        cache.clear()
    cache[key] = value


def _encode_header(
    items: list[tuple[str, str, tuple[int, ...], Any]], metadata: Mapping[str, str] | None
) -> tuple[bytes, tuple[TensorEntry, ...], tuple[int, ...]]:
    """(the header with its length prefix, the entries in data order, the items' indices in
    data order): widest dtype first, so every tensor is aligned."""
    order = sorted(range(len(items)), key=lambda i: -DTYPES[items[i][1]])
    header: dict[str, Any] = {}
    if metadata:
        header[_METADATA] = dict(metadata)
    entries: list[TensorEntry] = []
    offset = 0
    for i in order:
        name, code, shape, flat = items[i]
        end = offset + len(flat)
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, end]}
        entries.append(TensorEntry(name, code, shape, offset, end))
        offset = end
    text = msgspec.json.encode(header)
    text += b" " * (-len(text) % _PAD)
    return len(text).to_bytes(8, "little") + text, tuple(entries), tuple(order)


def _host_bytes(name: str, value: Any) -> tuple[str, memoryview]:
    """(dtype code, the C-contiguous little-endian bytes as a 1-D byte view)."""
    np = _numpy()
    if type(value) is np.ndarray and value.flags.c_contiguous and value.size:
        # the common case, no new array: a C-contiguous array in this host's byte order
        dtype = value.dtype
        code = _FROM_NUMPY.get((dtype.kind, dtype.itemsize))
        if code is not None and (dtype.byteorder in "|<" or (dtype.byteorder == "=" and _LE)):
            return code, memoryview(value).cast("B")
    kind = kind_of(value)
    if kind == "torch":
        torch = load_torch()
        code = _FROM_TORCH.get(str(value.dtype).removeprefix("torch."))
        if code is None:
            raise TensorFormatError(f"tensor {name!r}: dtype {value.dtype} is not supported")
        tensor = value.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        tensor = tensor.contiguous()
        if code == "BF16":
            tensor = tensor.view(torch.int16)
        array = tensor.numpy()
    elif kind == "numpy":
        array = value
        code = _FROM_NUMPY.get((array.dtype.kind, array.dtype.itemsize))
        if code is None:
            raise TensorFormatError(f"array {name!r}: dtype {array.dtype} is not supported")
    else:
        raise TensorFormatError(f"{name!r} is a {type(value).__name__}, not an array or tensor")
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and np.little_endian is False):
        array = array.astype(array.dtype.newbyteorder("<"), order="C")
    array = np.ascontiguousarray(array)
    return code, memoryview(array.reshape(-1).view(np.uint8))


_LE: Final = sys.byteorder == "little"


@functools.cache
def _numpy() -> Any:
    return load_numpy()


@functools.cache
def _dtype(code: str) -> Any:
    """The numpy dtype of an allowed dtype code, made once."""
    return _numpy().dtype(_NUMPY[code])


def read_header(
    buffer: Any, limits: TensorLimits = DEFAULT_LIMITS
) -> tuple[memoryview, list[TensorEntry], int, dict[str, str] | None]:
    """Parse and check a document's header: (byte view, entries by offset, data start, metadata)."""
    view = memoryview(buffer)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    size = len(view)
    if size < 8:
        raise TensorFormatError("tensor document shorter than its 8-byte header length")
    header_len = int.from_bytes(view[:8], "little")
    if header_len > limits.max_header_bytes:
        raise TensorFormatError(
            f"tensor header of {header_len} bytes is over the limit of {limits.max_header_bytes}"
        )
    if 8 + header_len > size:
        raise TensorFormatError("tensor header length runs past the end of the document")
    start = 8 + header_len
    data_len = size - start
    if data_len > limits.max_bytes:
        raise TensorFormatError(
            f"tensor data of {data_len} bytes is over the limit of {limits.max_bytes}"
        )
    key: Any = None
    if header_len <= _KEPT_HEADER_BYTES:
        text = view[8:start].tobytes()
        key = (text, data_len) if limits is DEFAULT_LIMITS else (text, data_len, limits)
        known = _READ.get(key)
        if known is not None:
            return view, [*known[0]], start, None if known[1] is None else {**known[1]}
    entries, metadata = _check_header(view[8:start], data_len, limits)
    if key is not None:
        _keep(_READ, key, (tuple(entries), metadata and {**metadata}))
    return view, entries, start, metadata


def _check_header(
    text: memoryview, data_len: int, limits: TensorLimits
) -> tuple[list[TensorEntry], dict[str, str] | None]:
    """The entries (by offset) and metadata of a header's JSON text, every rule checked."""
    try:
        raw = _HEADER.decode(text)
    except msgspec.DecodeError as exc:
        raise TensorFormatError(f"tensor header is not a JSON object: {exc}") from None
    metadata: dict[str, str] | None = None
    entries: list[TensorEntry] = []
    if len(raw) > limits.max_tensors + 1:
        raise TensorFormatError(f"more than {limits.max_tensors} tensors in one document")
    for name, value in raw.items():
        if name == _METADATA:
            try:
                metadata = _META.decode(value)
            except msgspec.DecodeError as exc:
                raise TensorFormatError(f"tensor __metadata__: {exc}") from None
            continue
        entries.append(_entry(name, value, limits))
    if len(entries) > limits.max_tensors:
        raise TensorFormatError(f"more than {limits.max_tensors} tensors in one document")
    entries.sort(key=lambda e: (e.begin, e.end))
    expected = 0
    for entry in entries:
        if entry.begin != expected:
            what = "overlaps another" if entry.begin < expected else "leaves a gap before it"
            raise TensorFormatError(f"tensor {entry.name!r} {what}")
        expected = entry.end
    if expected != data_len:
        raise TensorFormatError(
            f"tensor data is {data_len} bytes but the header describes {expected}"
        )
    return entries, metadata


def _entry(name: str, value: msgspec.Raw, limits: TensorLimits) -> TensorEntry:
    if not name or len(name) > limits.max_name_chars:
        raise TensorFormatError("tensor name empty or too long")
    try:
        info = _INFO.decode(value)
    except msgspec.DecodeError as exc:
        raise TensorFormatError(f"tensor {name!r}: {exc}") from None
    itemsize = DTYPES.get(info.dtype)
    if itemsize is None:
        raise TensorFormatError(f"tensor {name!r}: dtype {info.dtype!r} is not allowed")
    if len(info.shape) > limits.max_ndim:
        raise TensorFormatError(f"tensor {name!r}: more than {limits.max_ndim} dimensions")
    begin, end = info.data_offsets
    if end < begin:
        raise TensorFormatError(f"tensor {name!r}: data_offsets end before they begin")
    if math.prod(info.shape) * itemsize != end - begin:
        raise TensorFormatError(
            f"tensor {name!r}: shape {info.shape} of {info.dtype} does not fit {end - begin} bytes"
        )
    return TensorEntry(name, info.dtype, tuple(info.shape), begin, end)


def unpack(
    buffer: Any, to: Kind = "numpy", limits: TensorLimits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """Decode a document into ``{name: array}`` (``to="numpy"``) or torch tensors, zero-copy."""
    view, entries, start, _ = read_header(buffer, limits)
    if to == "torch" and view.readonly:
        view = memoryview(bytearray(view))  # torch shares only writable memory
    return {e.name: _array(view, e, start, to) for e in entries}


def _array(view: memoryview, entry: TensorEntry, start: int, to: Kind) -> Any:
    np = _numpy()
    itemsize = DTYPES[entry.dtype]
    count = (entry.end - entry.begin) // itemsize
    array = np.frombuffer(view, _dtype(entry.dtype), count, start + entry.begin)
    if entry.dtype == "BOOL" and count and array.view(np.uint8).max() > 1:
        raise TensorFormatError(f"tensor {entry.name!r}: booleans must be 0 or 1")
    if not array.flags.aligned:
        array = array.copy()  # a foreign encoder's odd offset: aligned memory for the kernels
    array = array.reshape(entry.shape)
    if to == "numpy":
        if entry.dtype == "BF16":
            raise TensorFormatError(
                f"tensor {entry.name!r} is bfloat16, which numpy lacks: decode it with torch"
            )
        return array
    torch = load_torch()
    tensor = torch.from_numpy(array)
    return tensor.view(torch.bfloat16) if entry.dtype == "BF16" else tensor
