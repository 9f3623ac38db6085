"""The floor: a framework-free ASGI app that answers every POST with a canned ``tools/call`` result.

It reads the whole body and decodes it with msgspec (only to recover the JSON-RPC id), then
writes a pre-built response. Anything an MCP framework does on top of this is its overhead.
A ``server/discover`` request gets a canned discovery answer instead, so that a client that
asks first (``millimcp bench``, ``benchmarks/lab_generator.py``) can drive it too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import msgspec

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class _Envelope(msgspec.Struct):
    id: int | str | None = None


_decode = msgspec.json.Decoder(_Envelope).decode
_encode = msgspec.json.Encoder().encode
_RESULT_TAIL = (
    b',"result":{"content":[{"type":"text","text":"hello"}],"isError":false,'
    b'"resultType":"complete"}}'
)
_DISCOVER_TAIL = (
    b',"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},'
    b'"resultType":"complete"}}'
)
_HEADERS = [(b"content-type", b"application/json")]


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    if scope["method"] != "POST":
        await send({"type": "http.response.start", "status": 405, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    request = b"".join(chunks)
    try:
        request_id = _decode(request).id
    except msgspec.DecodeError:
        await send({"type": "http.response.start", "status": 400, "headers": _HEADERS})
        await send(
            {
                "type": "http.response.body",
                "body": b'{"jsonrpc":"2.0","id":null,"error":'
                b'{"code":-32700,"message":"Parse error"}}',
            }
        )
        return
    tail = _DISCOVER_TAIL if b'"server/discover"' in request else _RESULT_TAIL
    body = b'{"jsonrpc":"2.0","id":' + _encode(request_id) + tail
    headers = [*_HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
