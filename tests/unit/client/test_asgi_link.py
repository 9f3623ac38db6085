"""The in-memory link against hand-written ASGI apps: streamed replies, cancellation as
``http.disconnect``, framed bodies both ways, refusals, the GET stream and DELETE."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, MutableMapping
from typing import Any

import pytest

from millimcp.client.asgi_link import AsgiLink
from millimcp.codec.attachment import frame, split
from millimcp.errors import NotSent, RequestRejected
from millimcp.protocol import Message

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}'
RESULT = b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}'
PROGRESS = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _start(send: Send, status: int, content_type: bytes, *extra: Any) -> None:
    headers = [(b"content-type", content_type), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def _ignore(message: Message) -> None:
    raise AssertionError(f"unexpected message {message!r}")


async def test_messages_before_the_response_reach_on_message_as_they_come() -> None:
    heard = asyncio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await _body(receive)
        await _start(send, 200, b"text/event-stream")
        event = b"data: " + PROGRESS + b"\n\n"
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await heard.wait()  # the response only after the client has seen the progress
        await send({"type": "http.response.body", "body": b"data: " + RESULT + b"\n\n"})

    seen: list[Any] = []

    async def on_message(message: Message) -> None:
        seen.append(message.method)
        heard.set()

    link = AsgiLink(app)
    await link.open()
    async with asyncio.timeout(10):  # a stall bound: a buffered stream never answers
        reply = await link.request(1, REQUEST, headers={}, on_message=on_message)
    await link.close()
    assert seen == ["notifications/progress"]
    assert reply.status == 200
    assert bytes(reply.message.result) == b'{"content":[]}'


async def test_cancelling_a_request_disconnects_the_app() -> None:
    got: asyncio.Queue[str] = asyncio.Queue()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        got.put_nowait(json.loads(await _body(receive))["method"])
        got.put_nowait((await receive())["type"])  # waits while the client is there

    link = AsgiLink(app)
    await link.open()
    call = asyncio.ensure_future(link.request(1, REQUEST, headers={}, on_message=_ignore))
    async with asyncio.timeout(10):
        assert await got.get() == "tools/call"
        assert got.empty()
        call.cancel()
        assert await got.get() == "http.disconnect"
    with pytest.raises(asyncio.CancelledError):
        await call
    await link.close()


async def test_framed_bodies_both_ways() -> None:
    async def mirror(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        assert headers[b"content-type"] == b"application/vnd.millimcp.tensor"
        assert b"application/vnd.millimcp.tensor" in headers[b"accept"]
        body = await _body(receive)
        assert int(headers[b"content-length"]) == len(body)
        message, attachment = split(bytearray(body), 1 << 20)
        assert json.loads(message)["id"] == 1
        parts = frame(RESULT, [bytes(attachment)])
        await _start(send, 200, b"application/vnd.millimcp.tensor")
        for index, part in enumerate(parts):
            more = index < len(parts) - 1
            await send({"type": "http.response.body", "body": part, "more_body": more})

    link = AsgiLink(mirror, tensors=True)
    await link.open()
    attachment = [b"abc", memoryview(b"defgh")]
    reply = await link.request(1, REQUEST, headers={}, on_message=_ignore, attachment=attachment)
    await link.close()
    assert reply.attachment is not None
    assert bytes(reply.attachment) == b"abcdefgh"
    assert not reply.attachment.readonly  # a view of the one writable buffer read
    assert bytes(reply.message.result) == b'{"content":[]}'


async def test_a_refusal_with_an_error_response_is_a_reply() -> None:
    async def busy(scope: Scope, receive: Receive, send: Send) -> None:
        await _body(receive)
        error = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32010,"message":"busy"}}'
        await _start(send, 429, b"application/json", (b"retry-after", b"3"))
        await send({"type": "http.response.body", "body": error})

    link = AsgiLink(busy)
    await link.open()
    reply = await link.request(1, REQUEST, headers={}, on_message=_ignore)
    await link.close()
    assert reply.status == 429
    assert reply.retry_after_s == 3.0
    assert reply.message.error


async def test_a_refusal_without_one_is_request_rejected() -> None:
    async def forbidden(scope: Scope, receive: Receive, send: Send) -> None:
        await _start(send, 403, b"text/plain")
        await send({"type": "http.response.body", "body": b"go away"})

    link = AsgiLink(forbidden)
    await link.open()
    with pytest.raises(RequestRejected) as refused:
        await link.request(1, REQUEST, headers={}, on_message=_ignore)
    await link.close()
    assert refused.value.status == 403
    assert "go away" in str(refused.value)


async def test_an_app_that_fails_is_a_server_error(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("boom")

    link = AsgiLink(broken)
    await link.open()
    with pytest.raises(RequestRejected) as refused:
        await link.request(1, REQUEST, headers={}, on_message=_ignore)
    await link.close()
    assert refused.value.status == 500
    assert any("the ASGI app failed" in record.getMessage() for record in caplog.records)


async def test_the_session_get_stream_and_delete() -> None:
    calls: list[tuple[str, str | None]] = []
    stream_open = asyncio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        session = headers.get(b"mcp-session-id")
        calls.append((scope["method"], None if session is None else session.decode()))
        if scope["method"] == "POST":
            await _body(receive)
            await _start(send, 200, b"application/json", (b"mcp-session-id", b"s-7"))
            await send({"type": "http.response.body", "body": RESULT})
        elif scope["method"] == "GET":
            assert headers[b"accept"] == b"text/event-stream"
            await _start(send, 200, b"text/event-stream")
            note = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
            event = b"data: " + note + b"\n\n"
            await send({"type": "http.response.body", "body": event, "more_body": True})
            stream_open.set()
            assert (await receive())["type"] == "http.disconnect"
        else:
            await _start(send, 200, b"application/json")
            await send({"type": "http.response.body", "body": b""})

    link = AsgiLink(app)
    await link.open()
    await link.request(1, REQUEST, headers={}, on_message=_ignore)  # the session: s-7
    stream = link.unsolicited()
    assert isinstance(stream, AsyncGenerator)
    async with asyncio.timeout(10):
        message = await anext(stream)
        assert message.method == "notifications/tools/list_changed"
        assert link.stream_ready.is_set()
        await stream_open.wait()
    await stream.aclose()
    assert not link.stream_ready.is_set()
    await link.close()
    assert calls == [("POST", None), ("GET", "s-7"), ("DELETE", "s-7")]
    assert link.session_id is None
    with pytest.raises(NotSent):
        await link.request(2, REQUEST, headers={}, on_message=_ignore)
