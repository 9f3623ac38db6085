"""The tensor wire format: round trips of every dtype and shape, safetensors compatibility,
zero-copy decode, and strict refusal of malformed documents."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

from millimcp.errors import TensorFormatError
from millimcp.tensor import DTYPES, TensorLimits, pack, unpack
from millimcp.tensor.wire import read_header

NUMPY_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
TORCH_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]
SHAPES = [(), (0,), (3, 0, 2), (1,), (7,), (2, 3, 4), (1, 3, 224, 224)]


def sample(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(sum(shape) + len(dtype))
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(size=shape).astype(dtype)


def document(header: dict[str, object], data: bytes, pad: bytes = b"") -> bytes:
    text = json.dumps(header).encode() + pad
    return len(text).to_bytes(8, "little") + text + data


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_every_numpy_dtype_and_shape_round_trips(dtype: str, shape: tuple[int, ...]) -> None:
    array = sample(dtype, shape)
    data = pack({"x": array}).tobytes()
    (back,) = unpack(data).values()
    assert back.dtype == array.dtype
    assert back.shape == shape
    np.testing.assert_array_equal(back, array)
    # the reference implementation reads what we write, and we read what it writes
    np.testing.assert_array_equal(safetensors.numpy.load(data)["x"], array)
    np.testing.assert_array_equal(unpack(safetensors.numpy.save({"x": array}))["x"], array)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_every_torch_dtype_and_shape_round_trips(
    dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    generator = torch.Generator().manual_seed(len(shape))
    if dtype == torch.bool:
        tensor = torch.randint(0, 2, shape, generator=generator).bool()
    elif dtype.is_floating_point:
        tensor = torch.randn(shape, generator=generator).to(dtype)
    else:
        tensor = torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape).to(dtype)
    data = pack({"t": tensor}).tobytes()
    back = unpack(bytearray(data), "torch")["t"]
    assert back.dtype == dtype
    assert tuple(back.shape) == shape
    assert torch.equal(back, tensor)
    assert torch.equal(safetensors.torch.load(data)["t"], tensor)
    assert torch.equal(unpack(safetensors.torch.save({"t": tensor}), "torch")["t"], tensor)


def test_a_dict_of_mixed_tensors_round_trips_with_metadata() -> None:
    tensors = {
        "weights": np.arange(6, dtype=np.float64).reshape(2, 3),
        "mask": np.array([True, False, True]),
        "ids": np.array([1, 2, 3], dtype=np.int8),
        "scalar": np.array(2.5, dtype=np.float16),
    }
    data = pack(tensors, metadata={"model": "m1"}).tobytes()
    back = unpack(data)
    assert set(back) == set(tensors)
    for name, array in tensors.items():
        np.testing.assert_array_equal(back[name], array)
    assert read_header(data)[3] == {"model": "m1"}


def test_large_tensor_round_trips_without_copy() -> None:
    array = np.random.default_rng(1).standard_normal(10_000_000).astype(np.float32)
    packed = pack({"x": array})
    assert np.shares_memory(np.frombuffer(packed.parts[1], np.float32), array)  # not copied
    body = bytearray(packed.tobytes())
    back = unpack(body)["x"]
    np.testing.assert_array_equal(back, array)
    assert np.shares_memory(back, np.frombuffer(body, np.uint8))  # a view of the buffer
    tensor = unpack(body, "torch")["x"]
    assert tensor.data_ptr() == back.ctypes.data  # torch shares the same memory


def test_non_contiguous_input_is_packed() -> None:
    base = np.arange(48, dtype=np.int32).reshape(6, 8)
    for view in (base[::2, 1::3], base.T, base[:, ::-1]):
        assert not view.flags.c_contiguous
        np.testing.assert_array_equal(unpack(pack({"v": view}).tobytes())["v"], view)
    tensor = torch.arange(24.0).reshape(4, 6).T
    assert torch.equal(unpack(bytearray(pack({"t": tensor}).tobytes()), "torch")["t"], tensor)


def test_big_endian_input_is_converted_to_little_endian() -> None:
    array = np.array([[1.5, -2.0], [1e10, 3.25]], dtype=">f8")
    data = pack({"x": array}).tobytes()
    back = unpack(data)["x"]
    assert back.dtype == np.dtype("<f8")
    np.testing.assert_array_equal(back, array)
    assert data.endswith(np.array([1.5, -2.0, 1e10, 3.25], "<f8").tobytes())


def test_tensors_start_aligned() -> None:
    data = pack({"a": np.ones(3, np.int8), "b": np.ones(3, np.float64), "c": np.ones(1, np.int16)})
    _, entries, start, _ = read_header(data.tobytes())
    assert start % 8 == 0
    for entry in entries:
        assert entry.begin % DTYPES[entry.dtype] == 0


def test_torch_decode_of_read_only_bytes_copies_once_and_warns_nothing() -> None:
    data = pack({"x": np.arange(4, dtype=np.float32)}).tobytes()  # bytes: read-only
    assert torch.equal(unpack(data, "torch")["x"], torch.arange(4.0))


def test_bfloat16_needs_torch_to_decode() -> None:
    data = pack({"x": torch.ones(2, dtype=torch.bfloat16)}).tobytes()
    with pytest.raises(TensorFormatError, match="bfloat16"):
        unpack(data, "numpy")


@pytest.mark.parametrize(
    "value",
    [np.array(["a"]), np.array([1 + 2j]), np.array([1], dtype=np.uint32), [1.0, 2.0], "text"],
    ids=["str", "complex", "uint32", "list", "str-value"],
)
def test_unsupported_values_are_refused(value: object) -> None:
    with pytest.raises(TensorFormatError):
        pack({"x": value})


def test_reserved_or_empty_names_are_refused() -> None:
    for name in ("", "__metadata__"):
        with pytest.raises(TensorFormatError, match="name"):
            pack({name: np.zeros(1)})


F32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
MALFORMED = {
    "shorter than 8 bytes": b"\x01\x00",
    "header past the end": (100).to_bytes(8, "little") + b"{}",
    "header not JSON": document({}, b"")[:8] + b"nope",
    "header not an object": (2).to_bytes(8, "little") + b"[]",
    "unknown dtype": document({"x": {**F32, "dtype": "C64"}}, bytes(8)),
    "negative dim": document({"x": {**F32, "shape": [-2]}}, bytes(8)),
    "float dim": document({"x": {**F32, "shape": [2.0]}}, bytes(8)),
    "shape does not fit bytes": document({"x": {**F32, "shape": [3]}}, bytes(8)),
    "huge shape": document({"x": {**F32, "shape": [2**40, 2**40]}}, bytes(8)),
    "end before begin": document({"x": {**F32, "data_offsets": [8, 0]}}, bytes(8)),
    "trailing data": document({"x": F32}, bytes(12)),
    "data too short": document({"x": F32}, bytes(4)),
    "overlap": document({"x": F32, "y": F32}, bytes(16)),
    "gap": document({"x": {**F32, "data_offsets": [4, 12]}}, bytes(12)),
    "unknown field": document({"x": {**F32, "extra": 1}}, bytes(8)),
    "bad metadata": document({"__metadata__": {"a": 1}, "x": F32}, bytes(8)),
    "boolean not 0/1": document(
        {"x": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x07"
    ),
    "missing offsets": document({"x": {"dtype": "F32", "shape": [2]}}, bytes(8)),
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_documents_get_a_clear_error(data: bytes) -> None:
    for to in ("numpy", "torch"):
        with pytest.raises(TensorFormatError):
            unpack(data, to)


def test_caps_are_checked() -> None:
    data = pack({"a": np.zeros(4), "b": np.zeros(2)}).tobytes()
    with pytest.raises(TensorFormatError, match="over the limit"):
        unpack(data, limits=TensorLimits(max_bytes=40))
    with pytest.raises(TensorFormatError, match="more than 1 tensors"):
        unpack(data, limits=TensorLimits(max_tensors=1))
    with pytest.raises(TensorFormatError, match="header"):
        unpack(data, limits=TensorLimits(max_header_bytes=16))
    deep = pack({"x": np.zeros((1,) * 5)}).tobytes()
    with pytest.raises(TensorFormatError, match="dimensions"):
        unpack(deep, limits=TensorLimits(max_ndim=4))


def test_a_forged_huge_header_allocates_nothing_big() -> None:
    """A header claiming a terabyte tensor is refused before any allocation of that size."""
    forged = [
        document({"x": {"dtype": "F64", "shape": [2**37], "data_offsets": [0, 2**40]}}, bytes(8)),
        (2**62).to_bytes(8, "little") + b"{}",
        document({"x": {"dtype": "U8", "shape": [2**63], "data_offsets": [0, 2**63]}}, b""),
    ]
    tracemalloc.start()
    try:
        for data in forged:
            with pytest.raises(TensorFormatError):
                unpack(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_foreign_unaligned_document_decodes_to_aligned_arrays() -> None:
    # a header of odd length puts the data at an odd offset (safetensors pads; others may not)
    data = document({"x": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}}, b"")
    data += np.array([1.0, 2.0]).tobytes()
    assert (len(data) - 16) % 8 != 0
    back = unpack(data)["x"]
    assert back.flags.aligned
    np.testing.assert_array_equal(back, [1.0, 2.0])
    assert torch.equal(unpack(data, "torch")["x"], torch.tensor([1.0, 2.0], dtype=torch.float64))


def test_a_header_packed_before_is_reused_with_the_new_data() -> None:
    first = {"w": np.arange(3, dtype=np.float64), "b": np.arange(5, dtype=np.uint8)}
    again = {"w": np.arange(3, dtype=np.float64) + 1, "b": np.arange(5, dtype=np.uint8) + 1}
    packed, repacked = pack(first), pack(again)
    assert repacked.parts[0] is packed.parts[0]  # the header, encoded once
    assert repacked.entries == packed.entries
    for name, value in unpack(repacked.tobytes()).items():
        np.testing.assert_array_equal(value, again[name])
    a, c = np.zeros(2, dtype=np.float32), np.ones(3, dtype=np.float32)
    ac, ca = pack({"a": a, "c": c}), pack({"c": c, "a": a})  # same width: kept in order
    assert ac.parts[0] != ca.parts[0]
    for packed_ in (ac, ca):
        back = unpack(packed_.tobytes())
        np.testing.assert_array_equal(back["a"], a)
        np.testing.assert_array_equal(back["c"], c)
    with_metadata = pack(first, {"k": "v"})
    assert read_header(with_metadata.tobytes())[3] == {"k": "v"}


def test_a_header_read_before_is_still_checked_against_its_data_and_limits() -> None:
    data = pack({"x": np.zeros(2, dtype=np.float32)}).tobytes()
    read_header(data)
    entries = read_header(data)[1]  # read before: the kept entries, as a list of its own
    entries.clear()
    assert [e.name for e in read_header(data)[1]] == ["x"]
    with pytest.raises(TensorFormatError, match="describes"):
        unpack(data + bytes(4))  # the same header, other data: checked again
    with pytest.raises(TensorFormatError, match="over the limit"):
        unpack(data, limits=TensorLimits(max_bytes=4))
    with pytest.raises(TensorFormatError, match="name"):
        unpack(data, limits=TensorLimits(max_name_chars=0))  # other limits: checked again
    forged = MALFORMED["overlap"]
    for _ in range(2):  # refused every time, never kept
        with pytest.raises(TensorFormatError, match="overlaps"):
            unpack(forged)


def test_the_kept_headers_are_bounded() -> None:
    from millimcp.tensor import wire

    for n in range(wire.KEPT + 10):
        unpack(pack({"x": np.zeros(n, dtype=np.uint8)}).tobytes())
    assert 0 < len(wire._READ) <= wire.KEPT
    assert 0 < len(wire._PACKED) <= wire.KEPT
