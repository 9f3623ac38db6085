"""millimcp.protocol.jsonrpc: envelope decoding and the encoded replies."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from millimcp.codec.json import DEFAULT_MAX_DEPTH
from millimcp.errors import (
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    ProtocolError,
)
from millimcp.protocol import (
    decode_message,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
)
from millimcp.protocol.jsonrpc import ABSENT

# -- the three kinds of message -------------------------------------------------------------------


def test_decode_a_request() -> None:
    message = decode_message(b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"a":[1]}}')
    assert message.is_request
    assert not message.is_notification
    assert not message.is_response
    assert message.id == 7
    assert message.method == "tools/list"
    assert json.loads(bytes(message.params)) == {"a": [1]}


def test_params_stay_raw_bytes_exactly_as_sent() -> None:
    params = b'{ "b" : 2,"a":[1, 2.50] }'
    message = decode_message(b'{"jsonrpc":"2.0","id":"x","method":"m","params":' + params + b"}")
    assert isinstance(message.params, msgspec.Raw)
    assert bytes(message.params) == params


def test_decode_a_request_with_a_string_id() -> None:
    message = decode_message(b'{"id":"abc","method":"m","jsonrpc":"2.0"}')
    assert message.id == "abc"
    assert message.is_request


def test_decode_a_request_with_a_huge_integer_id() -> None:
    message = decode_message(b'{"jsonrpc":"2.0","id":1180591620717411303424,"method":"m"}')
    assert message.id == 2**70
    assert (
        encode_result(message.id, {})
        == b'{"jsonrpc":"2.0","id":1180591620717411303424,"result":{}}'
    )


def test_decode_a_notification() -> None:
    message = decode_message(b'{"jsonrpc":"2.0","method":"notifications/cancelled"}')
    assert message.is_notification
    assert not message.is_request
    assert message.id is ABSENT
    assert bytes(message.params) == b""


def test_decode_a_response() -> None:
    message = decode_message(b'{"jsonrpc":"2.0","id":3,"result":{"ok":true}}')
    assert message.is_response
    assert not message.is_request
    assert json.loads(bytes(message.result)) == {"ok": True}
    error = decode_message(b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"x"}}')
    assert error.is_response
    assert json.loads(bytes(error.error))["code"] == -32601


def test_params_are_not_validated_by_the_envelope_decoder() -> None:
    """Params stay raw: numbers msgspec would refuse in a typed decode pass through here."""
    for params in (b'{"a":1e400}', b'{"a":' + b"9" * 5000 + b"}"):
        message = decode_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + params + b"}")
        assert bytes(message.params) == params


def test_an_id_too_long_for_msgspec_is_an_invalid_request() -> None:
    error = invalid(b'{"jsonrpc":"2.0","id":' + b"9" * 4301 + b',"method":"m"}')
    assert error.request_id is None
    assert "out of range" in error.message


def test_unknown_members_are_ignored() -> None:
    message = decode_message(b'{"jsonrpc":"2.0","id":1,"method":"m","extra":{"deep":[1]}}')
    assert message.is_request


# -- invalid requests -----------------------------------------------------------------------------


def invalid(body: bytes) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        decode_message(body)
    assert info.value.code == -32600
    assert info.value.http_status == 400
    return info.value


def test_a_batch_is_an_invalid_request() -> None:
    error = invalid(b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]')
    assert error.request_id is None


@pytest.mark.parametrize("body", [b"1", b'"x"', b"null", b"true", b"[]"])
def test_a_non_object_is_an_invalid_request(body: bytes) -> None:
    assert invalid(body).request_id is None


def test_missing_jsonrpc_keeps_the_salvaged_id() -> None:
    assert invalid(b'{"id":7,"method":"m"}').request_id == 7
    assert invalid(b'{"id":"s-1","method":"m"}').request_id == "s-1"


@pytest.mark.parametrize("version", [b'"1.0"', b'"2"', b'"2.0 "', b'""'])
def test_a_wrong_jsonrpc_version_keeps_the_id(version: bytes) -> None:
    error = invalid(b'{"jsonrpc":' + version + b',"id":"a","method":"m"}')
    assert error.request_id == "a"


def test_a_non_string_jsonrpc_keeps_the_id() -> None:
    assert invalid(b'{"jsonrpc":2.0,"id":9,"method":"m"}').request_id == 9


def test_a_non_string_method_keeps_the_id() -> None:
    assert invalid(b'{"jsonrpc":"2.0","id":5,"method":5}').request_id == 5


def test_missing_method_with_an_id_is_an_invalid_request_carrying_the_id() -> None:
    assert invalid(b'{"jsonrpc":"2.0","id":11}').request_id == 11


def test_a_null_id_is_an_invalid_request() -> None:
    error = invalid(b'{"jsonrpc":"2.0","id":null,"method":"m"}')
    assert error.request_id is None
    assert "null" in error.message


@pytest.mark.parametrize(
    ("raw_id", "why"),
    [(b"true", "bool"), (b"1.5", "float"), (b"1.0", "float"), (b"[1]", "array"), (b"{}", "obj")],
)
def test_ids_of_the_wrong_type_are_invalid_and_not_echoed(raw_id: bytes, why: str) -> None:
    error = invalid(b'{"jsonrpc":"2.0","id":' + raw_id + b',"method":"m"}')
    assert error.request_id is None, why


def test_the_last_duplicate_member_wins() -> None:
    invalid(b'{"jsonrpc":"2.0","id":1,"method":"m","jsonrpc":"1.0"}')


# -- parse errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b'{"jsonrpc":"2.0",}',
        b"{'jsonrpc':'2.0'}",
        b'{"jsonrpc":"2.0","id":1,"method":"m"} trailing',
        b'{"jsonrpc":"2.0","id":NaN,"method":"m"}',
        b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
        b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',
        b"\xef\xbb\xbf{}",
    ],
)
def test_malformed_json_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError) as info:
        decode_message(body)
    assert info.value.code == -32700
    assert info.value.http_status == 400
    assert info.value.request_id is None


def test_deep_nesting_in_params_is_a_parse_error() -> None:
    params = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(ParseError):
        decode_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + params + b"}")


def test_nesting_just_over_the_cap_is_a_parse_error() -> None:
    # The envelope object is one level; params add DEFAULT_MAX_DEPTH more.
    deep = b"[" * DEFAULT_MAX_DEPTH + b"]" * DEFAULT_MAX_DEPTH
    with pytest.raises(ParseError) as info:
        decode_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + deep + b"}")
    assert "deeper" in info.value.message


def test_nesting_at_the_cap_is_accepted() -> None:
    depth = DEFAULT_MAX_DEPTH - 1
    fits = b"[" * depth + b"]" * depth
    message = decode_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + fits + b"}")
    assert message.is_request


def test_a_custom_depth_cap() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":{"b":{}}}}'
    decode_message(body, max_depth=4)
    with pytest.raises(ParseError):
        decode_message(body, max_depth=3)


def test_brackets_in_strings_do_not_trip_the_cap() -> None:
    text = b"[" * 5_000
    message = decode_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":"' + text + b'"}')
    assert message.is_request


# -- encoding -------------------------------------------------------------------------------------


def test_encode_result_shape() -> None:
    assert json.loads(encode_result(1, {"tools": []})) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"tools": []},
    }
    assert encode_result("a", None) == b'{"jsonrpc":"2.0","id":"a","result":null}'


def test_encode_error_echoes_the_id() -> None:
    body = json.loads(encode_error(4, MethodNotFound("Method not found: x")))
    assert body == {
        "jsonrpc": "2.0",
        "id": 4,
        "error": {"code": -32601, "message": "Method not found: x"},
    }


def test_encode_error_with_data() -> None:
    body = json.loads(encode_error("r", InvalidParams("bad", {"name": "t"})))
    assert body["error"] == {"code": -32602, "message": "bad", "data": {"name": "t"}}
    assert body["id"] == "r"


@pytest.mark.parametrize("request_id", [None, ABSENT])
def test_encode_error_omits_an_unknown_id(request_id: msgspec.UnsetType | None) -> None:
    body = json.loads(encode_error(request_id, ParseError("Parse error")))
    assert "id" not in body
    assert body == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}


def test_encode_error_falls_back_to_the_id_the_error_carries() -> None:
    error = InvalidRequest("Invalid request", request_id="salvaged")
    assert json.loads(encode_error(None, error))["id"] == "salvaged"
    # An explicit id wins over the carried one.
    assert json.loads(encode_error(3, error))["id"] == 3


def test_encode_error_of_a_decode_failure_round_trip() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_message(b'{"id":12,"method":"m"}')
    body = json.loads(encode_error(None, info.value))
    assert body["id"] == 12
    assert body["error"]["code"] == -32600


def test_encode_notification_and_request() -> None:
    assert encode_notification("notifications/x") == b'{"jsonrpc":"2.0","method":"notifications/x"}'
    assert json.loads(encode_notification("n", {"a": 1})) == {
        "jsonrpc": "2.0",
        "method": "n",
        "params": {"a": 1},
    }
    assert json.loads(encode_request(2, "tools/list")) == {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/list",
    }


@pytest.mark.parametrize("text", ["", "hello", 'quote " and \\ back', "é ✓ \U0001f600", "\x00\n"])
@pytest.mark.parametrize(
    "meta", [None, {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}]
)
@pytest.mark.parametrize("request_id", [1, "abc", 2**70])
def test_a_text_result_template_writes_the_bytes_of_the_struct(
    text: str, meta: dict[str, Any] | None, request_id: int | str
) -> None:
    from millimcp.protocol.types import CallToolResult, TextContent, TextResultTemplate

    built = CallToolResult(content=[TextContent(text=text)], meta=meta)
    rendered = TextResultTemplate(meta).render(text)
    assert encode_result(request_id, rendered) == encode_result(request_id, built)
    head = TextResultTemplate(meta).parts[0]
    assert head.startswith(b'{"resultType":"complete",')  # without_result_type finds it
