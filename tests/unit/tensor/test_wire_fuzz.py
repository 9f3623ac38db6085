"""Hypothesis-forged tensor documents: never a crash, never an allocation beyond the input.

Whatever the header claims, ``unpack`` either raises TensorFormatError or returns arrays that
are views into the given bytes (their total size within the data region), decoded exactly as
the header says.
"""

from __future__ import annotations

import json
import math
import tracemalloc
from typing import Any

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from millimcp.errors import TensorFormatError
from millimcp.tensor import DTYPES, unpack

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

dims = st.one_of(
    st.integers(0, 6), st.integers(-3, 2**70), st.sampled_from([2**31, 2**32, 2**63, 2**64])
)
dtypes = st.one_of(st.sampled_from(list(DTYPES)), st.text(max_size=5))
offsets = st.one_of(st.integers(0, 64), st.integers(-5, 2**65))
entries = st.fixed_dictionaries(
    {
        "dtype": dtypes,
        "shape": st.lists(dims, max_size=5),
        "data_offsets": st.lists(offsets, min_size=2, max_size=2),
    },
    optional={"extra": st.integers()},
)
headers = st.dictionaries(
    st.one_of(st.text(max_size=8), st.just("__metadata__")), entries, max_size=5
)


def build(header: Any, data: bytes, declared_extra: int) -> bytes:
    text = json.dumps(header).encode()
    return (len(text) + declared_extra).to_bytes(8, "little") + text + data


def check(document: bytes) -> None:
    tracemalloc.start()
    try:
        try:
            tensors = unpack(document)
        except TensorFormatError:
            event("refused")
            return
        finally:
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    event("accepted")
    assert peak < 4 * len(document) + (1 << 16)
    total = 0
    for array in tensors.values():
        assert isinstance(array, np.ndarray)
        total += array.nbytes
        assert math.prod(array.shape) * array.itemsize == array.nbytes
    assert total <= len(document)


@FUZZ
@given(headers, st.binary(max_size=256), st.sampled_from([0, 0, 0, -1, 1, 2**40]))
def test_forged_headers_never_crash_or_over_allocate(
    header: dict[str, Any], data: bytes, declared_extra: int
) -> None:
    document = build(header, data, declared_extra)
    if len(document) >= 8 and int.from_bytes(document[:8], "little") < 2**64:
        check(document)


@FUZZ
@given(st.binary(max_size=512))
def test_arbitrary_bytes_never_crash(document: bytes) -> None:
    check(document)


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["F32", "I8", "F64", "BOOL", "I16"]),
            st.lists(st.integers(0, 4), max_size=3),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_well_formed_headers_decode_exactly(specs: list[tuple[str, list[int]]]) -> None:
    header: dict[str, Any] = {}
    offset = 0
    for i, (dtype, shape) in enumerate(specs):
        size = math.prod(shape) * DTYPES[dtype]
        header[f"t{i}"] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    document = build(header, bytes(offset), 0)
    tensors = unpack(document)
    for i, (_, shape) in enumerate(specs):
        assert tensors[f"t{i}"].shape == tuple(shape)
