"""The typed floor: the raw floor plus the decoding and encoding a typed MCP framework cannot skip.

Where ``raw_echo.py`` reads only the JSON-RPC id, this app decodes the whole request with
millimcp's own typed request decoder (``tools/call`` params, ``_meta`` included, as the
server's hot path does), decodes the tool's arguments into their struct, and encodes the
text result around the envelope as millimcp does (``TextResultTemplate``, ``encode_result``).
No checks of any kind (Host, Origin, sizes, eras, headers against the body), no context, no
cancellation, no limits: what separates millimcp's count from this one is its rules and its
plumbing, not its parsing. ``benchmarks/instructions.py --targets raw,typed,millimcp``.
"""

from __future__ import annotations

from typing import Any

import msgspec
from raw_echo import Receive, Scope, Send, _lifespan

from millimcp.protocol.jsonrpc import RequestDecoder, encode_result
from millimcp.protocol.types.tools import CallToolParams, TextResultTemplate

_REQUEST: Any = RequestDecoder({"tools/call": CallToolParams}).named["tools/call"]


class _Arguments(msgspec.Struct):
    text: str


_ARGUMENTS = msgspec.json.Decoder(_Arguments)
_TEXT = TextResultTemplate()
_JSON = (b"content-type", b"application/json")


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    dict(scope["headers"])  # every framework builds its header lookup once
    message = await receive()
    request = _REQUEST.decode(message["body"])
    text = _ARGUMENTS.decode(request.params.arguments).text
    body = encode_result(request.id, _TEXT.render(text))
    headers = [_JSON, (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
