"""millimcp.session.router: decoding every kind of message, and one request run to its outcome."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import pytest

from millimcp.errors import (
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    Overloaded,
    ParseError,
    ProtocolError,
    ToolError,
)
from millimcp.protocol import RequestStateSealer
from millimcp.protocol.types import (
    CallToolParams,
    CallToolResult,
    ClientCapabilities,
    ElicitParams,
    ElicitRequest,
    LegacyEmptyResult,
    RequestMeta,
    TextContent,
)
from millimcp.session import Context, InputRequired, Mrtr, Router
from millimcp.session.inflight import Call

MODERN_META = RequestMeta(protocol_version="2026-07-28", client_capabilities=ClientCapabilities())
LEGACY_META = RequestMeta(protocol_version="2025-11-25", client_capabilities=ClientCapabilities())


async def call_tool(params: CallToolParams, ctx: Context) -> CallToolResult:
    arguments = msgspec.json.decode(params.arguments) if params.arguments else {}
    if params.name == "fail":
        raise RuntimeError("boom")
    if params.name == "busy":
        raise Overloaded("busy", {"retryAfterMs": 3000}, retry_after_s=3)
    if params.name == "bad":
        raise InvalidParams("Unknown tool: bad")
    if params.name == "ask":
        raise InputRequired(
            {"name": ElicitRequest(params=ElicitParams(message="name?"))}, state={"n": 1}
        )
    if params.name == "hang":
        await asyncio.sleep(3600)
    if params.name == "tensors":
        attachments = ctx.attachments
        assert attachments is not None
        attachments.reply = [b"\x00" * 8]
    if params.name == "tool_error":
        raise ToolError("not a protocol error")  # a handler's own business: here, a bug
    return CallToolResult(content=[TextContent(text=json.dumps(arguments))])


async def ping(params: Any, ctx: Context) -> LegacyEmptyResult:
    return LegacyEmptyResult()


def router() -> Router:
    sealer = RequestStateSealer(b"k" * 32)
    return Router({"tools/call": call_tool, "ping": ping}, Mrtr(sealer))


def request(method: str, params: Any = None, request_id: Any = 1) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def test_a_well_formed_request_takes_the_fast_path() -> None:
    method, request_id, params, route, message = router().admit(
        request("tools/call", {"name": "echo", "arguments": {"a": 1}}, 7)
    )
    assert (method, request_id, message) == ("tools/call", 7, None)
    assert route is not None
    assert route.name_field == "name"
    assert route.input_required
    assert isinstance(params, CallToolParams)
    assert bytes(params.arguments) == b'{"a": 1}'


def test_notifications_and_responses_come_back_with_their_message() -> None:
    method, request_id, params, route, message = router().admit(
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    )
    assert (method, request_id, params, route) == ("notifications/initialized", None, None, None)
    assert message is not None
    method, request_id, _, route, message = router().admit(b'{"jsonrpc":"2.0","id":3,"result":{}}')
    assert (method, request_id, route) == (None, 3, None)
    assert message is not None


@pytest.mark.parametrize(
    ("body", "error", "request_id"),
    [
        (b"{", ParseError, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\xff"}}', ParseError,
         None),
        (b'{"jsonrpc":"1.0","id":4,"method":"ping"}', InvalidRequest, 4),
        (b'{"jsonrpc":"2.0","id":5,"method":"nope"}', MethodNotFound, 5),
        (b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":3}}', InvalidParams, 6),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', InvalidRequest, None),
        (b'{"jsonrpc":"2.0","id":8,"method":"x","params":' + b"[" * 200 + b"]" * 200 + b"}",
         ParseError, None),
    ],
)  # fmt: skip
def test_what_is_wrong_is_said_precisely(
    body: bytes, error: type[ProtocolError], request_id: Any
) -> None:
    with pytest.raises(error) as raised:
        router().admit(body)
    assert raised.value.request_id == request_id


def test_responses_are_refused_where_clients_must_not_send_them() -> None:
    with pytest.raises(InvalidRequest):
        router().admit(b'{"jsonrpc":"2.0","id":3,"result":{}}', responses=False)


def test_a_modern_binding_does_not_find_handshake_methods() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"bogus":'  # the slow path
    with pytest.raises(ParseError):
        router().admit(body, version="2026-07-28")
    slow = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":[]}'
    with pytest.raises(MethodNotFound):
        router().admit(slow, version="2026-07-28")
    with pytest.raises(InvalidParams):
        router().admit(slow, version="2025-11-25")


def test_deep_nesting_is_refused_on_the_fast_path_too() -> None:
    arguments = "[" * 130 + "]" * 130  # past the default limit of 128
    body = request("tools/call", {"name": "echo", "arguments": {"x": json.loads(arguments)}})
    with pytest.raises(ParseError):
        router().admit(body)


def test_the_method_the_binding_names_is_a_hint_the_body_overrules() -> None:
    decoder = router().requests
    body = request("tools/call", {"name": "echo"})
    assert decoder.decode(body, "tools/call")[:2] == ("tools/call", 1)  # type: ignore[index]
    named = decoder.decode(body, "ping")  # Mcp-Method disagrees: the body's method, typed
    assert named is not None
    assert named[0] == "tools/call"
    assert isinstance(named[2], CallToolParams)
    assert (
        decoder.decode(
            b'{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"e"}}', "tools/call"
        )
        is None
    )


def test_the_tightest_body_past_the_limit_is_still_scanned() -> None:
    # Nothing but brackets besides the envelope: 129 deep, the least text a request can carry.
    inner = b"[" * 127 + b"]" * 127
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","x":'
    body += inner + b"}}"
    with pytest.raises(ParseError):
        router().admit(body)
    fits = body.replace(b"[]", b"1")  # 128 deep: accepted
    assert router().admit(fits)[0] == "tools/call"


async def run(name: str, meta: RequestMeta = MODERN_META, **context: Any) -> Any:
    r = router()
    _, request_id, params, route, _ = r.admit(request("tools/call", {"name": name}, 9))
    assert route is not None
    ctx = Context(request_id, "tools/call", meta, **context)
    return await r.run(route, params, ctx)


async def test_a_result_is_an_outcome_value() -> None:
    status, body, headers, attachment, compressible = await run("echo")
    assert (status, headers, attachment, compressible) == (200, None, None, True)
    reply = json.loads(body)
    assert reply["id"] == 9
    assert reply["result"]["resultType"] == "complete"


async def test_a_handshake_era_reply_has_no_result_type() -> None:
    _, body, *_ = await run("echo", LEGACY_META)
    assert "resultType" not in json.loads(body)["result"]


async def test_errors_become_error_replies_with_their_http_status() -> None:
    status, body, headers, _, _ = await run("busy")
    assert (status, headers) == (503, [(b"retry-after", b"3")])
    assert json.loads(body)["error"] == {
        "code": -32050,
        "message": "busy",
        "data": {"retryAfterMs": 3000},
    }
    status, body, headers, _, _ = await run("bad")
    assert (status, headers, json.loads(body)["error"]["code"]) == (400, None, -32602)
    for name in ("fail", "tool_error"):
        status, body, _, _, _ = await run(name)
        assert status == 500
        assert json.loads(body)["error"] == {"code": -32603, "message": "Internal error"}


async def test_input_required_is_sealed_in_the_modern_era_only() -> None:
    status, body, _, _, _ = await run("ask")
    result = json.loads(body)["result"]
    assert status == 200
    assert result["resultType"] == "input_required"
    assert result["inputRequests"]["name"]["method"] == "elicitation/create"
    assert result["requestState"].startswith("m1.")
    status, body, _, _, _ = await run("ask", LEGACY_META, session=object())
    assert status == 500  # a handshake session asks the client directly: raising is a bug


class Source:
    """An attachment source as the HTTP fronts give one."""

    def __init__(self, streaming: bool = False) -> None:
        self.attachment: memoryview | None = memoryview(bytearray(b"abc"))
        self.streaming = streaming


async def test_an_attachment_comes_back_on_the_outcome() -> None:
    _, _, _, attachment, compressible = await run("tensors", _source=Source())
    assert attachment == [b"\x00" * 8]
    assert compressible
    _, _, _, attachment, _ = await run("echo", _source=Source())
    assert attachment is None  # a handler that does not look costs nothing


def test_attachments_are_made_on_first_use_and_know_the_reply() -> None:
    assert Context(1, "tools/call", None).attachments is None
    source = Source()
    ctx = Context(1, "tools/call", None, _source=source)
    attachments = ctx.attachments
    assert attachments is not None
    assert ctx.attachments is attachments
    assert attachments.request is not None
    assert bytes(attachments.request) == b"abc"
    assert attachments.can_reply
    source.streaming = True
    assert not attachments.can_reply


async def test_a_request_its_peer_gave_up_on_has_no_outcome() -> None:
    r = router()
    _, request_id, params, route, _ = r.admit(request("tools/call", {"name": "hang"}))
    assert route is not None
    call = Call()
    ctx = Context(request_id, "tools/call", MODERN_META)
    task = asyncio.ensure_future(r.run(route, params, ctx, call))
    call.task = task
    await asyncio.sleep(0.01)
    call.cancel()
    assert await task is None
    assert not task.cancelled()


async def test_any_other_cancellation_propagates() -> None:
    r = router()
    _, request_id, params, route, _ = r.admit(request("tools/call", {"name": "hang"}))
    assert route is not None
    ctx = Context(request_id, "tools/call", MODERN_META)
    task = asyncio.ensure_future(r.run(route, params, ctx, Call()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
