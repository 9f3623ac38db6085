"""millimcp.codec.json: the depth cap, exact big integers, what msgspec refuses."""

from __future__ import annotations

import math
from collections.abc import Callable

import msgspec
import pytest

from millimcp.codec import (
    DEFAULT_MAX_DEPTH,
    JsonDecodeFailure,
    check_depth,
    decode,
    decoder_for,
    encode,
)

# -- check_depth ----------------------------------------------------------------------------------


def nested_array(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def nested_object(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def test_check_depth_rejects_a_100000_deep_array() -> None:
    with pytest.raises(JsonDecodeFailure) as info:
        check_depth(nested_array(100_000))
    assert info.value.kind == "too_deep"
    assert str(DEFAULT_MAX_DEPTH) in info.value.message


def test_decode_of_a_100000_deep_array_is_too_deep_not_a_crash() -> None:
    with pytest.raises(JsonDecodeFailure) as info:
        decode(nested_array(100_000))
    assert info.value.kind == "too_deep"


@pytest.mark.parametrize("make", [nested_array, nested_object])
def test_a_body_at_exactly_the_cap_passes_and_one_deeper_fails(
    make: Callable[[int], bytes],
) -> None:
    check_depth(make(DEFAULT_MAX_DEPTH))
    with pytest.raises(JsonDecodeFailure) as info:
        check_depth(make(DEFAULT_MAX_DEPTH + 1))
    assert info.value.kind == "too_deep"


def test_check_depth_honours_a_custom_cap() -> None:
    check_depth(nested_array(5), max_depth=5)
    with pytest.raises(JsonDecodeFailure):
        check_depth(nested_array(6), max_depth=5)


def test_mixed_arrays_and_objects_count_together() -> None:
    body = b'{"a":[' * 65 + b"1" + b"]}" * 65  # 130 levels
    with pytest.raises(JsonDecodeFailure):
        check_depth(body)
    check_depth(b'{"a":[' * 64 + b"1" + b"]}" * 64)  # 128 levels


def test_wide_but_shallow_bodies_pass() -> None:
    """Many brackets (more than the cap) that never nest deep are fine."""
    body = b"[" + b",".join([b"[[]]"] * 10_000) + b"]"
    check_depth(body)


def test_brackets_inside_strings_do_not_count() -> None:
    body = b'["' + b"[" * 10_000 + b"{" * 10_000 + b'"]'
    check_depth(body)
    assert decode(body) == ["[" * 10_000 + "{" * 10_000]


def test_escaped_quotes_do_not_end_a_string_early() -> None:
    # The string is  \"[[[[...  : the escaped quote must not close it.
    body = b'["\\"' + b"[" * 1_000 + b'"]'
    check_depth(body)
    assert decode(body) == ['"' + "[" * 1_000]


def test_an_escaped_backslash_does_end_a_string() -> None:
    # "\\" is a complete string; the brackets after it are real nesting.
    body = b'["\\\\",' + nested_array(DEFAULT_MAX_DEPTH + 1) + b"]"
    with pytest.raises(JsonDecodeFailure) as info:
        check_depth(body)
    assert info.value.kind == "too_deep"


def test_real_nesting_after_a_string_full_of_brackets_still_counts() -> None:
    body = b'["' + b"]" * 500 + b'",' + nested_array(DEFAULT_MAX_DEPTH) + b"]"
    with pytest.raises(JsonDecodeFailure):
        check_depth(body)


# -- numbers --------------------------------------------------------------------------------------


def test_two_to_the_seventy_round_trips_exactly() -> None:
    value: object = decode(b"1180591620717411303424")
    assert value == 2**70
    assert isinstance(value, int)
    assert encode(2**70) == b"1180591620717411303424"
    assert decode(encode(-(2**70))) == -(2**70)


@pytest.mark.parametrize("sign", ["", "-"])
def test_a_300_digit_integer_round_trips_exactly(sign: str) -> None:
    text = sign + "7" + "1234567890" * 29 + "123456789"
    assert len(text.lstrip("-")) == 300
    value: int = decode(text.encode())
    assert value == int(text)
    assert encode(value) == text.encode()
    assert decode(b'{"n":' + text.encode() + b"}") == {"n": int(text)}


def test_msgspec_big_integer_limit_is_4300_characters() -> None:
    """msgspec parses integer literals of up to 4300 characters (sign included) exactly."""
    biggest = "9" * 4300
    assert decode(biggest.encode()) == int(biggest)
    assert decode(("-" + "9" * 4299).encode()) == -int("9" * 4299)
    for too_long in ("9" * 4301, "-" + "9" * 4300, "1" + "0" * 5000):
        with pytest.raises(JsonDecodeFailure) as info:
            decode(too_long.encode())
        assert info.value.kind == "invalid"
        assert "out of range" in info.value.message


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"[NaN]", b"nan"])
def test_nan_and_infinity_literals_are_rejected(literal: bytes) -> None:
    with pytest.raises(JsonDecodeFailure) as info:
        decode(literal)
    assert info.value.kind == "malformed"


@pytest.mark.parametrize("literal", [b"1e400", b"-1e400", b"1E400", b"[1.0e+309]"])
def test_numbers_that_overflow_a_float_are_rejected(literal: bytes) -> None:
    with pytest.raises(JsonDecodeFailure) as info:
        decode(literal)
    assert info.value.kind == "invalid"
    assert "out of range" in info.value.message


def test_the_largest_finite_float_is_accepted() -> None:
    value: float = decode(b"1.7976931348623157e308")
    assert math.isfinite(value)
    assert value == 1.7976931348623157e308


# -- strings --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b'"\xff"', b'"\xc3"', b'"\xed\xa0\x80"', b'{"a\xfe":1}', b'"\x80abc"'],
    ids=["ff", "truncated", "encoded-surrogate", "in-key", "continuation"],
)
def test_invalid_utf8_is_rejected(body: bytes) -> None:
    with pytest.raises(JsonDecodeFailure) as info:
        decode(body)
    assert info.value.kind == "malformed"


@pytest.mark.parametrize(
    "body", [b'"\\ud800"', b'"\\udc00"', b'"\\ud800x"', b'"\\ud800\\u0041"', b'"\\udfff\\ud800"']
)
def test_lone_surrogate_escapes_are_rejected(body: bytes) -> None:
    with pytest.raises(JsonDecodeFailure) as info:
        decode(body)
    assert info.value.kind == "malformed"


def test_a_valid_surrogate_pair_decodes_to_one_code_point() -> None:
    assert decode(b'"\\ud83d\\ude00"') == "\U0001f600"


# -- typed decoding -------------------------------------------------------------------------------


def test_typed_decode_validates_while_parsing() -> None:
    assert decode(b'{"a":1}', dict[str, int]) == {"a": 1}
    with pytest.raises(JsonDecodeFailure) as info:
        decode(b'[1,"2"]', list[int])
    assert info.value.kind == "invalid"
    assert "$[1]" in info.value.message


def test_malformed_input_is_malformed_even_when_typed() -> None:
    with pytest.raises(JsonDecodeFailure) as info:
        decode(b'{"a":', dict[str, int])
    assert info.value.kind == "malformed"


def test_decode_accepts_a_memoryview() -> None:
    assert decode(memoryview(b'[1,"x"]')) == [1, "x"]


def test_decoders_are_cached_per_type() -> None:
    assert decoder_for(list[int]) is decoder_for(list[int])
    assert decoder_for(list[int]) is not decoder_for(list[str])
    assert isinstance(decoder_for(int), msgspec.json.Decoder)


def test_encode_is_compact() -> None:
    assert encode({"a": [1, 2], "b": None}) == b'{"a":[1,2],"b":null}'
