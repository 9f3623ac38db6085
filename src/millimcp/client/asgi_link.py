"""The in-memory link: Streamable HTTP to an ASGI app called in-process, no socket.

:class:`AsgiLink` is an HTTP :class:`~millimcp.client.link.Link` whose "network" is a
function call: each POST, GET and DELETE is one ASGI ``http`` call of the app (the scope a
server would build for a request from 127.0.0.1), run in a task of its own so that the
client and the app interleave as over a socket:

- the request body is what ``receive()`` returns (a framed body, ``dev.millimcp/tensor``,
  as one event per buffer); once it is read, ``receive()`` waits and returns
  ``http.disconnect`` when the client goes away (the request is cancelled) or the response
  is complete, as uvicorn does, so the server's disconnect watcher works unchanged;
- the response is read from ``send()`` as the app sends it: a JSON or framed body whole, an
  SSE stream event by event (progress and server-to-client requests reach ``on_message``
  before the response); the handshake era's session id, GET stream and DELETE as over HTTP.

What it does not do: compression, connection pooling, resuming a stream that ends early
(a ConnectionLost here), TLS, and anything a real network does to bytes. Test those with
:meth:`millimcp.client.Client.over_http` against a served app.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    MutableMapping,
)
from typing import Any, Final, Literal

from millimcp.client.http_reply import (
    ACCEPT,
    ACCEPT_ATTACHMENTS,
    DEFAULT_MAX_ATTACHMENT_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    decode_or_none,
    find_response,
    reply_of,
    split_framed,
)
from millimcp.client.link import Attachment, OnMessage, Reply
from millimcp.codec import ATTACHMENT_MEDIA_TYPE, SseParser
from millimcp.codec.attachment import frame
from millimcp.codec.compress import decompress
from millimcp.errors import ConnectionLost, FrameTooLarge, NotSent, RequestRejected
from millimcp.protocol import Message

__all__ = ["AsgiApp", "AsgiLink"]

log: Final = logging.getLogger("millimcp.client")

AsgiApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ],
    Awaitable[None],
]
"""An ASGI 3 application."""

_DRAIN_S: Final = 1.0
"""How long an app may go on with a stream after its response before it is disconnected."""
_CLOSE_S: Final = 2.0
"""How long closing waits for the app's calls to end before cancelling them."""
_GET_RETRY_S: Final = 1.0
_SERVER_ERROR: Final = b"Internal Server Error"


class _Call:
    """One ASGI ``http`` call of the app: the request fed in, the response read out."""

    def __init__(self, app: AsgiApp, scope: dict[str, Any], body: list[Any]) -> None:
        self._body = collections.deque(body)
        self._fed = False
        self.gone = asyncio.Event()
        """Set when the client went away or the response is complete."""
        loop = asyncio.get_running_loop()
        self.started: asyncio.Future[tuple[int, dict[str, str]]] = loop.create_future()
        self._chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._broken = False
        self.task = loop.create_task(self._run(app, scope))

    async def _run(self, app: AsgiApp, scope: dict[str, Any]) -> None:
        try:
            await app(scope, self._receive, self._send)
        except Exception:
            log.exception("the ASGI app failed")
            if not self.started.done():
                self.started.set_result((500, {"content-type": "text/plain"}))
                self._chunks.put_nowait(_SERVER_ERROR)
            else:
                self._broken = True
        finally:
            if not self.started.done():
                self.started.set_exception(ConnectionLost("the app sent no response"))
            self._chunks.put_nowait(None)
            self.gone.set()

    async def _receive(self) -> MutableMapping[str, Any]:
        if self._body:
            part = self._body.popleft()
            self._fed = True
            return {"type": "http.request", "body": bytes(part), "more_body": bool(self._body)}
        if not self._fed:
            self._fed = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: MutableMapping[str, Any]) -> None:
        if self.gone.is_set():
            return  # the client left: what the app still sends goes nowhere
        kind = message["type"]
        if kind == "http.response.start" and not self.started.done():
            headers = {
                name.decode("latin-1").lower(): value.decode("latin-1")
                for name, value in message.get("headers", ())
            }
            self.started.set_result((message["status"], headers))
        elif kind == "http.response.body":
            body = message.get("body", b"")
            if body:
                self._chunks.put_nowait(body)
            if not message.get("more_body", False):
                self._chunks.put_nowait(None)
                self.gone.set()

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The response body as the app sends it; ConnectionLost if the app broke off."""
        while (chunk := await self._chunks.get()) is not None:
            yield chunk
        self._chunks.put_nowait(None)
        if self._broken:
            raise ConnectionLost("the app failed in the middle of its response")

    async def read(self, limit: int) -> bytearray:
        """The whole response body; FrameTooLarge past ``limit`` bytes."""
        body = bytearray()
        async for chunk in self.chunks():
            body += chunk
            if len(body) > limit:
                raise FrameTooLarge(limit)
        return body

    def leave(self) -> None:
        """The client goes away: the app's ``receive()`` returns ``http.disconnect``."""
        self.gone.set()


class AsgiLink:
    """A :class:`~millimcp.client.link.Link` to an ASGI app in this process (see the module
    docstring). ``path`` is the endpoint's; ``headers`` go with every request; ``tensors``:
    raw tensor bodies are accepted (``dev.millimcp/tensor`` declared)."""

    kind: Literal["http", "stdio"] = "http"

    def __init__(
        self,
        app: AsgiApp,
        *,
        path: str = "/mcp",
        host: str = "localhost",
        headers: Mapping[str, str] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        tensors: bool = False,
        max_attachment_bytes: int = DEFAULT_MAX_ATTACHMENT_BYTES,
    ) -> None:
        self.app = app
        self.path = path
        self.max_message_bytes = max_message_bytes
        self.tensors = tensors
        self.max_attachment_bytes = max_attachment_bytes
        self.stream_ready = asyncio.Event()
        """Set while the handshake era's GET stream is connected."""
        base = {
            "host": host,
            "content-type": "application/json",
            "accept": ACCEPT_ATTACHMENTS if tensors else ACCEPT,
            "user-agent": "millimcp",
        }
        base.update({name.lower(): value for name, value in (headers or {}).items()})
        self._base = base
        self._calls: set[_Call] = set()
        self._session_id: str | None = None
        self._version: str | None = None
        self._state: Literal["new", "open", "closed"] = "new"

    def __repr__(self) -> str:
        return (
            f"<AsgiLink {self.path} {self._state} calls={len(self._calls)} "
            f"session={self._session_id is not None}>"
        )

    # -- Link -------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._state == "new":
            self._state = "open"

    async def close(self) -> None:
        if self._state == "closed":
            return
        try:
            if self._session_id is not None and self._state == "open":
                await self._delete_session()
        finally:
            self._state = "closed"
            self._session_id = None
            calls = tuple(self._calls)
            for call in calls:
                call.leave()
            if calls:
                _, pending = await asyncio.wait([c.task for c in calls], timeout=_CLOSE_S)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def reset_session(self) -> None:
        self._session_id = None

    async def request(
        self,
        request_id: int | str,
        body: bytes,
        *,
        headers: Mapping[str, str],
        on_message: OnMessage,
        attachment: Attachment | None = None,
    ) -> Reply:
        if attachment is None:
            call = self._call("POST", headers, [body])
        else:
            type_ = {"Content-Type": ATTACHMENT_MEDIA_TYPE}
            call = self._call("POST", {**headers, **type_}, frame(body, list(attachment)))
        done = True
        try:
            status, got = await call.started
            if self._session_id is None and "mcp-session-id" in got:
                self._session_id = got["mcp-session-id"]
            content_type = got.get("content-type", "")
            if content_type.startswith("text/event-stream"):
                parser = SseParser(self.max_message_bytes)
                async with contextlib.aclosing(call.chunks()) as chunks:
                    message = await find_response(chunks, parser, request_id, on_message)
                if message is None:
                    raise ConnectionLost("the response stream ended before the response")
                done = False  # the app ends its stream on its own, soon
                return Reply(message, status)
            if self.tensors and content_type.startswith(ATTACHMENT_MEDIA_TYPE):
                framed = await call.read(self.max_attachment_bytes)
                data, received = split_framed(framed, self.max_message_bytes)
                return reply_of(status, data, None, "")._replace(attachment=received)
            data = bytes(await call.read(self.max_message_bytes))
            coding = got.get("content-encoding")
            if coding is not None:
                data = decompress(data, coding, self.max_message_bytes)
            return reply_of(status, data, got.get("retry-after"), "")
        finally:
            if done:
                call.leave()
            else:
                asyncio.get_running_loop().call_later(_DRAIN_S, call.leave)

    async def send(self, body: bytes, *, headers: Mapping[str, str]) -> None:
        version = headers.get("MCP-Protocol-Version")
        if version is not None:
            self._version = version
        call = self._call("POST", headers, [body])
        try:
            status, _ = await call.started
            text = bytes(await call.read(self.max_message_bytes))
        finally:
            call.leave()
        if status >= 300:
            raise RequestRejected(status, text[:500].decode("utf-8", "replace"))

    async def unsolicited(self) -> AsyncIterator[Message]:
        """The handshake era's GET stream, opened again with ``Last-Event-ID`` when the app
        ends it; over when there is no session, the app refuses the stream, or the link
        closes."""
        last_id: str | None = None
        while self._state == "open" and self._session_id is not None:
            headers = {"Accept": "text/event-stream"}
            if self._version is not None:
                headers["MCP-Protocol-Version"] = self._version
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            call = self._call("GET", headers, [])
            parser = SseParser(self.max_message_bytes)
            try:
                status, got = await call.started
                if status != 200 or not got.get("content-type", "").startswith("text/event-stream"):
                    log.debug("GET stream refused: HTTP %d", status)
                    return
                self.stream_ready.set()
                async with contextlib.aclosing(call.chunks()) as chunks:
                    async for chunk in chunks:
                        for data in parser.feed(chunk):
                            message = decode_or_none(data)
                            if message is not None:
                                yield message
            except (ConnectionLost, FrameTooLarge) as exc:
                log.debug("GET stream broke (%r); opening it again", exc)
            finally:
                self.stream_ready.clear()
                call.leave()
            last_id = parser.last_id or last_id
            await asyncio.sleep(_GET_RETRY_S if parser.retry_ms is None else parser.retry_ms / 1000)

    # -- calls of the app -------------------------------------------------------------------

    def _call(self, method: str, headers: Mapping[str, str], body: list[Any]) -> _Call:
        if self._state != "open":
            raise NotSent("the client is closed" if self._state == "closed" else "not open")
        merged = dict(self._base)
        merged.update({name.lower(): value for name, value in headers.items()})
        if self._session_id is not None:
            merged["mcp-session-id"] = self._session_id
        if method == "POST":
            merged["content-length"] = str(sum(memoryview(part).nbytes for part in body))
        else:
            merged.pop("content-type", None)
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in merged.items()],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 80),
        }
        call = _Call(self.app, scope, body)
        self._calls.add(call)
        call.task.add_done_callback(lambda _: self._calls.discard(call))
        return call

    async def _delete_session(self) -> None:
        headers = {} if self._version is None else {"MCP-Protocol-Version": self._version}
        call = self._call("DELETE", headers, [])
        try:
            async with asyncio.timeout(_CLOSE_S):
                await call.started
                await call.read(self.max_message_bytes)
        except (TimeoutError, ConnectionLost, FrameTooLarge) as exc:
            log.debug("DELETE of the session failed: %r", exc)
        finally:
            call.leave()
