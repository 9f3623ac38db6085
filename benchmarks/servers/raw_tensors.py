"""The floor: a framework-free ASGI app that moves the same float32 bytes with no MCP at all.

``POST /out?n=N`` answers N float32 values as raw bytes; ``POST /take`` reads raw bytes and
answers their count; ``POST /echo`` answers the body it got; ``POST /infer`` reads a
1x3x224x224 image and answers 1,000 floats.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import numpy as np

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DATA = np.random.default_rng(0).standard_normal(10_000_000).astype(np.float32)
_HEADERS = [(b"content-type", b"application/octet-stream")]


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
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    path = scope["path"]
    if path == "/out":
        n = int(scope["query_string"].decode().partition("=")[2])
        reply: Any = DATA[:n].data.cast("B")
    elif path == "/echo":
        reply = body
    elif path == "/take":
        reply = np.int64(np.frombuffer(body, np.float32).size).tobytes()
    elif path == "/infer":
        image = np.frombuffer(body, np.float32).reshape(1, 3, 224, 224)
        reply = (DATA[:1000] + image[0, 0, 0, 0]).tobytes()
    else:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    headers = [*_HEADERS, (b"content-length", b"%d" % len(reply))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": reply})
