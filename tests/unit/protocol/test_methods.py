"""millimcp.protocol.methods: the reply decoders read servers of either era, one pass each."""

from __future__ import annotations

import pytest

from millimcp.errors import ProtocolError
from millimcp.protocol import METHODS
from millimcp.protocol.jsonrpc import ErrorObject, decode_error, encode_error
from millimcp.protocol.methods import reply_decoder
from millimcp.protocol.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    InputRequiredResult,
    ListToolsResult,
    ReadResourceResult,
    ResourceContents,
    TextResourceContents,
    narrow_block,
    narrow_blocks,
)


def test_every_method_has_a_decoder_made_once() -> None:
    for method in METHODS:
        assert reply_decoder(method) is reply_decoder(method)


def test_a_handshake_era_result_reads_without_result_type_or_cache_hints() -> None:
    page = reply_decoder("tools/list").decode(
        b'{"tools":[{"name":"a","inputSchema":{"type":"object"},"execution":{}}],"extra":1}'
    )
    assert isinstance(page, ListToolsResult)
    assert page.tools[0].name == "a"
    assert (page.ttl_ms, page.cache_scope) == (None, None)


def test_an_mrtr_method_reads_input_required_in_the_modern_era_only() -> None:
    raw = b'{"resultType":"input_required","inputRequests":{},"requestState":"s"}'
    assert isinstance(reply_decoder("tools/call").decode(raw), InputRequiredResult)
    complete = reply_decoder("tools/call").decode(b'{"content":[]}')
    assert isinstance(complete, CallToolResult)
    with pytest.raises(ProtocolError):
        reply_decoder("tools/call").decode(raw, modern=False)  # no content: not a result


def test_a_result_of_the_wrong_shape_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="invalid result"):
        reply_decoder("tools/list").decode(b'{"tools":3}')


def test_resource_contents_of_either_kind_read_as_one_type_and_narrow() -> None:
    result = reply_decoder("resources/read").decode(
        b'{"contents":[{"uri":"a","text":"t"},{"uri":"b","blob":"QQ=="},{"uri":"c"}]}'
    )
    assert isinstance(result, ReadResourceResult)
    assert all(type(item) is ResourceContents for item in result.contents)
    narrowed = [item.narrow() for item in result.contents]
    assert narrowed == [
        TextResourceContents(uri="a", text="t"),
        BlobResourceContents(uri="b", blob="QQ=="),
        TextResourceContents(uri="c", text=""),
    ]
    text = TextResourceContents(uri="d", text="x")
    assert text.narrow() is text


def test_embedded_resources_narrow_inside_content_blocks() -> None:
    result = reply_decoder("tools/call").decode(
        b'{"content":[{"type":"text","text":"hi"},'
        b'{"type":"resource","resource":{"uri":"x","blob":"QQ=="}}]}'
    )
    assert isinstance(result, CallToolResult)
    blocks = narrow_blocks(result.content)
    assert blocks[0] is result.content[0]
    embedded = blocks[1]
    assert isinstance(embedded, EmbeddedResource)
    assert embedded.resource == BlobResourceContents(uri="x", blob="QQ==")
    plain = [result.content[0]]
    assert narrow_blocks(plain) is plain  # nothing to narrow: no copy
    assert narrow_block(result.content[0]) is result.content[0]


def test_the_one_error_object_decoder() -> None:
    assert decode_error(b'{"code":-32602,"message":"m","data":{"x":1}}') == ErrorObject(
        -32602, "m", {"x": 1}
    )
    lenient = decode_error(b"{}")
    assert (lenient.code, lenient.message, lenient.details) == (-32603, "", None)
    assert decode_error(b"not json").message == "the peer sent a malformed error object"
    error = decode_error(b'{"code":-32050,"message":"busy"}').exception()
    assert type(error).__name__ == "Overloaded"
    strange = decode_error(b'{"code":-1,"message":"?"}').exception()
    assert strange.code == -1


def test_an_error_object_always_carries_code_and_message() -> None:
    assert encode_error(1, ProtocolError("")) == (
        b'{"jsonrpc":"2.0","error":{"code":-32603,"message":""},"id":1}'
    )
