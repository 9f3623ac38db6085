"""The call pipeline's request bytes: the envelope spliced around the id, method and params
is byte for byte what the protocol's encoder makes."""

from __future__ import annotations

import msgspec

from millimcp.client.envelope import trace_bytes, traceparent
from millimcp.client.pipeline import _REQUEST
from millimcp.codec import encode
from millimcp.protocol import decode_message, encode_request


def test_the_spliced_request_is_the_encoded_request() -> None:
    params = {
        "name": "echo",
        "arguments": {"text": 'a "quoted" \u00e9 text', "n": 2**70},
        "_meta": msgspec.Raw(b'{"traceparent":"' + trace_bytes() + b'"}'),
    }
    for request_id, method in ((1, "tools/call"), (2**40, "resources/read")):
        spliced = _REQUEST % (request_id, encode(method), encode(params))
        assert spliced == encode_request(request_id, method, params)
        message = decode_message(spliced)
        assert (message.id, message.method) == (request_id, method)


def test_trace_bytes_and_traceparent_are_one_format() -> None:
    for trace in (trace_bytes().decode(), traceparent()):
        version, trace_id, span_id, flags = trace.split("-")
        assert (version, flags, len(trace_id), len(span_id)) == ("00", "00", 32, 16)
        assert int(trace_id, 16)
        assert int(span_id, 16)
