"""millimcp.protocol.headers: the base64 sentinel and the header-vs-body checks."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millimcp.errors import HeaderMismatch
from millimcp.protocol import McpHeaders, decode_header_value, encode_header_value


def sentinel(raw: bytes) -> str:
    return "=?base64?" + base64.b64encode(raw).decode("ascii") + "?="


# -- the sentinel ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "héllo",
        "日本語",
        "emoji \U0001f600",
        " leading",
        "trailing ",
        "  both  ",
        "line\nbreak",
        "carriage\rreturn",
        "tab\tinside",
        "\t",
        "",
        "=?base64?YQ==?=",
        "=?base64??=",
        "nul\x00byte",
    ],
)
def test_values_that_are_not_plain_round_trip_through_the_sentinel(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded.startswith("=?base64?")
    assert encoded.endswith("?=")
    assert encoded.isascii()
    assert "\n" not in encoded
    assert "\r" not in encoded
    assert decode_header_value(encoded) == value


@pytest.mark.parametrize("value", ["plain", "tools/call", "a b", "test://x/{y}?z=1", "=?base64?"])
def test_plain_values_stay_plain(value: str) -> None:
    assert encode_header_value(value) == value
    assert decode_header_value(value) == value


def test_a_value_that_looks_like_the_sentinel_is_itself_encoded() -> None:
    lookalike = sentinel(b"a")
    assert decode_header_value(lookalike) == "a"
    encoded = encode_header_value(lookalike)
    assert encoded != lookalike
    assert decode_header_value(encoded) == lookalike


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_encode_then_decode_is_the_identity(value: str) -> None:
    encoded = encode_header_value(value)
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded)
    assert encoded == encoded.strip()
    assert decode_header_value(encoded) == value


@pytest.mark.parametrize(
    "bad",
    [
        "=?base64?YQ?=",  # missing padding
        "=?base64?YQ=?=",  # short padding
        "=?base64?YQ===?=",  # too much padding
        "=?base64?Y$==?=",  # a character outside the alphabet
        "=?base64?_-8=?=",  # the URL-safe alphabet is not base64
        "=?base64?YW Jj?=",  # whitespace inside
        "=?base64?Y?=",  # one character short of a quantum
    ],
)
def test_strict_base64_rejects_bad_encodings(bad: str) -> None:
    with pytest.raises(HeaderMismatch) as info:
        decode_header_value(bad)
    assert info.value.code == -32020
    assert info.value.http_status == 400


def test_sentinel_content_must_be_utf8() -> None:
    with pytest.raises(HeaderMismatch):
        decode_header_value(sentinel(b"\xff\xfe"))


@pytest.mark.parametrize("bad", ["a\x00b", "é", "line\nbreak", "\x7f", "caf\xe9"])
def test_plain_values_with_invalid_characters_are_rejected(bad: str) -> None:
    with pytest.raises(HeaderMismatch):
        decode_header_value(bad)


# -- McpHeaders checks ----------------------------------------------------------------------------


def test_check_method() -> None:
    McpHeaders(method="tools/call").check_method("tools/call")
    McpHeaders(method=" tools/call\t").check_method("tools/call")  # OWS is not part of it
    with pytest.raises(HeaderMismatch, match="does not match"):
        McpHeaders(method="tools/list").check_method("tools/call")
    with pytest.raises(HeaderMismatch, match="required"):
        McpHeaders().check_method("tools/call")
    with pytest.raises(HeaderMismatch):
        McpHeaders(method="Tools/Call").check_method("tools/call")


def test_check_version() -> None:
    McpHeaders(protocol_version="2026-07-28").check_version("2026-07-28")
    with pytest.raises(HeaderMismatch, match="does not match"):
        McpHeaders(protocol_version="2025-11-25").check_version("2026-07-28")
    with pytest.raises(HeaderMismatch, match="required"):
        McpHeaders().check_version("2026-07-28")


def test_check_name_plain_and_sentinel() -> None:
    McpHeaders(name="my_tool").check_name("my_tool")
    McpHeaders(name=" my_tool ").check_name("my_tool")
    McpHeaders(name=encode_header_value("outil-été")).check_name("outil-été")
    McpHeaders(name=sentinel(b"my_tool")).check_name("my_tool")
    with pytest.raises(HeaderMismatch, match="does not match"):
        McpHeaders(name="other").check_name("my_tool")
    with pytest.raises(HeaderMismatch, match="required"):
        McpHeaders().check_name("my_tool")


def test_check_name_of_a_name_that_looks_like_the_sentinel() -> None:
    name = sentinel(b"x")
    McpHeaders(name=encode_header_value(name)).check_name(name)
    # Sent verbatim, the header equals the body value, which is also accepted.
    McpHeaders(name=name).check_name(name)
    with pytest.raises(HeaderMismatch):
        McpHeaders(name=name).check_name("y")


def test_check_name_with_bad_base64_is_a_mismatch() -> None:
    with pytest.raises(HeaderMismatch):
        McpHeaders(name="=?base64?bm9w?").check_name("nop")
    with pytest.raises(HeaderMismatch):
        McpHeaders(name="=?base64?bm9w!?=").check_name("nop")


def params(**values: str) -> McpHeaders:
    """McpHeaders carrying ``Mcp-Param-*`` headers, the way the HTTP transport builds them."""
    raw = [(b"mcp-param-" + k.lower().encode(), v.encode("latin-1")) for k, v in values.items()]
    return McpHeaders(raw=raw)


def test_check_param_strings() -> None:
    params(region="eu-west").check_param("Region", "eu-west")
    params(region=encode_header_value(" Zürich ")).check_param("Region", " Zürich ")
    with pytest.raises(HeaderMismatch, match="does not match"):
        params(region="us").check_param("Region", "eu")


def test_check_param_header_names_are_case_insensitive() -> None:
    params(region="eu").check_param("REGION", "eu")


@pytest.mark.parametrize("sent", ["42", "42.0", "4.2e1", "42.000"])
def test_check_param_compares_numbers_numerically(sent: str) -> None:
    params(n=sent).check_param("N", 42)


@pytest.mark.parametrize("sent", ["43", "42.5", "forty-two", "", "inf", "nan", "0x2a"])
def test_check_param_rejects_other_numbers(sent: str) -> None:
    with pytest.raises(HeaderMismatch):
        params(n=sent).check_param("N", 42)


def test_check_param_negative_and_zero() -> None:
    params(n="-7").check_param("N", -7)
    params(n="0").check_param("N", 0)
    params(n="-0.0").check_param("N", 0)


def test_check_param_exact_big_integer_matches() -> None:
    params(n="9007199254740993").check_param("N", 2**53 + 1)


def test_check_param_big_integer_off_by_one_is_not_accepted() -> None:
    with pytest.raises(HeaderMismatch):
        params(n="9007199254740993").check_param("N", 2**53)


def test_check_param_booleans() -> None:
    params(flag="true").check_param("Flag", True)
    params(flag="false").check_param("Flag", False)
    for wrong in ("True", "1", "yes", "false"):
        with pytest.raises(HeaderMismatch):
            params(flag=wrong).check_param("Flag", True)
    with pytest.raises(HeaderMismatch):
        params(flag="0").check_param("Flag", False)


def test_check_param_missing_header_when_the_body_has_a_value() -> None:
    with pytest.raises(HeaderMismatch, match="required"):
        McpHeaders().check_param("Region", "eu")
    with pytest.raises(HeaderMismatch, match="required"):
        params(other="x").check_param("Region", "eu")
    with pytest.raises(HeaderMismatch, match="required"):
        McpHeaders().check_param("Flag", False)  # a falsy value is still a value
    with pytest.raises(HeaderMismatch, match="required"):
        McpHeaders().check_param("N", 0)


def test_check_param_null_value_needs_no_header() -> None:
    McpHeaders().check_param("Region", None)
    params(other="x").check_param("Region", None)


def test_check_param_string_that_looks_numeric_is_compared_as_text() -> None:
    params(code="42").check_param("Code", "42")
    with pytest.raises(HeaderMismatch):
        params(code="42.0").check_param("Code", "42")
