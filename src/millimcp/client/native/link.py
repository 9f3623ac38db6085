"""The native Streamable HTTP link: JSON-RPC message bytes over pooled HTTP/1.1 connections
on :class:`asyncio.Protocol` and httptools (no aiohttp on the path).

It behaves as :class:`~millimcp.client.http_link.HttpLink` does, rule for rule, and shares
its rules (:mod:`millimcp.client.http_reply`, :mod:`millimcp.client.http_rules`): the same
headers, the same caps (``max_message_bytes`` per message and per decoded body,
``max_attachment_bytes`` per framed reply), ``zstd``/``gzip`` bodies decoded under the cap,
SSE replies read event by event with the messages before the response going to
``on_message``, a stream that ends early resumed with ``Last-Event-ID``, the handshake era's
session id captured and its GET stream reconnected, ``DELETE`` on close, and the same
errors: a refused or timed-out connect is :class:`~millimcp.errors.NotSent`, a connection
that breaks after the request went out :class:`~millimcp.errors.ConnectionLost`, an HTTP
refusal that is not JSON-RPC :class:`~millimcp.errors.RequestRejected`. Cancelling a request
closes its connection.

Two pools, as in the aiohttp link: the calls' pool (``Limits.connections`` connections,
``Limits.keepalive`` kept idle for ``Limits.keepalive_expiry_s``; its counters are the
client's :attr:`~millimcp.client.results.ClientStats.connections_opened` and
``connections_reused``), and an uncapped side pool for long-lived streams (GET,
``subscriptions/listen``) and for answers to the server's requests.

No HTTP proxy is used (neither link reads ``HTTP_PROXY``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl as ssl_module
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

from millimcp.client.http_reply import (
    DEFAULT_MAX_ATTACHMENT_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DRAIN_S,
    base_headers,
    find_response,
    reply_of,
    split_framed,
)
from millimcp.client.http_rules import EVENT_STREAM, HttpRules, Stream
from millimcp.client.link import Attachment, OnMessage, Reply
from millimcp.client.native.connection import Connection
from millimcp.client.native.pool import Pool
from millimcp.codec import ATTACHMENT_MEDIA_TYPE, SseParser
from millimcp.codec.attachment import frame
from millimcp.codec.compress import decompress
from millimcp.errors import (
    ConnectionLost,
    FrameTooLarge,
    NotSent,
    RequestRejected,
    TensorFormatError,
)
from millimcp.resilience.policy import Limits, Timeout

if TYPE_CHECKING:  # the authorizer's own requests (to authorization servers) use aiohttp
    from millimcp.client.authorizer import Authorizer

__all__ = ["NativeLink"]

log: Final = logging.getLogger("millimcp.client")

_MAX_HEADS: Final = 256
"""Request heads kept encoded (per method and header set) before the cache starts over."""


def _context(ssl: Any) -> ssl_module.SSLContext:
    """The TLS context of ``ssl=`` as aiohttp reads it: a context as is, False for no
    verification, anything else the default verifying context."""
    if isinstance(ssl, ssl_module.SSLContext):
        return ssl
    context = ssl_module.create_default_context()
    if ssl is False:
        context.check_hostname = False
        context.verify_mode = ssl_module.CERT_NONE
    return context


def _check(headers: Mapping[str, str]) -> None:
    """Refuse a header that would split the request (a line break in a name or value)."""
    flat = "".join(headers) + "".join(headers.values())
    if "\r" in flat or "\n" in flat:
        raise ValueError("a header name or value holds a line break")


class NativeLink(HttpRules):
    """A :class:`~millimcp.client.link.Link` to one Streamable HTTP endpoint."""

    kind: Literal["http", "stdio"] = "http"
    _broken = (NotSent, ConnectionLost)
    _delete_errors = (NotSent, ConnectionLost, FrameTooLarge, TimeoutError)

    def __init__(
        self,
        url: str,
        *,
        limits: Limits | None = None,
        timeout: Timeout | None = None,
        headers: Mapping[str, str] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        ssl: Any = None,
        tensors: bool = False,
        max_attachment_bytes: int = DEFAULT_MAX_ATTACHMENT_BYTES,
        auth: Authorizer | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        super().__init__(
            url,
            limits=limits,
            timeout=timeout,
            max_message_bytes=max_message_bytes,
            tensors=tensors,
            max_attachment_bytes=max_attachment_bytes,
            auth=auth,
        )
        secure = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if secure else 80)
        self._tls = _context(ssl) if secure else None
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        host = f"[{self._host}]" if ":" in self._host else self._host
        if parts.port is not None:
            host += f":{parts.port}"
        self._base = base_headers(tensors, headers)
        _check(self._base)
        self._heads: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}
        """Per method and request headers: the request's head up to its length (the whole
        head for a GET), encoded once."""
        self._target = target
        self._host_header = host
        self._pool: Pool | None = None
        self._side: Pool | None = None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._pool is not None else "new"
        return (
            f"<NativeLink {self.url} {state} opened={self.connections_opened} "
            f"reused={self.connections_reused} session={self._session_id is not None}>"
        )

    @property
    def connections_opened(self) -> int:
        """Connections the calls' pool opened (a connect attempt that failed counts too)."""
        return 0 if self._pool is None else self._pool.opened

    @property
    def connections_reused(self) -> int:
        """Requests of the calls' pool that went out on a connection an earlier one opened."""
        return 0 if self._pool is None else self._pool.reused

    @property
    def tls_resumed(self) -> int:
        """TLS handshakes of the calls' pool that resumed an earlier session."""
        return 0 if self._pool is None else self._pool.resumed

    # -- Link -------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._pool is not None:
            return
        limits = self.limits
        self._pool = self._new_pool(limits.connections, limits.keepalive)
        self._closed = False

    def _new_pool(self, limit: int | None, keepalive: int) -> Pool:
        return Pool(
            self._host,
            self._port,
            ssl=self._tls,
            limit=limit,
            keepalive=keepalive,
            expiry_s=self.limits.keepalive_expiry_s,
            connect_timeout_s=self.timeout.connect,
        )

    def _side_pool(self) -> Pool:
        """The pool of what is not a call (streams, answers to the server's requests): apart
        from the calls' pool, so that a call waiting for its answer to be POSTed never waits
        for its own connection; not counted."""
        if self._side is None:
            self._side = self._new_pool(None, 8)
        return self._side

    async def _release(self) -> None:
        pool, self._pool = self._pool, None
        side, self._side = self._side, None
        if pool is not None:
            pool.close()
        if side is not None:
            side.close()

    async def request(
        self,
        request_id: int | str,
        body: bytes,
        *,
        headers: Mapping[str, str],
        on_message: OnMessage,
        attachment: Attachment | None = None,
    ) -> Reply:
        pool = self._pool
        if pool is None:
            raise NotSent("the client is closed")
        if self._session_id is not None:
            headers = {**headers, "Mcp-Session-Id": self._session_id}
        if headers.get("Mcp-Method") == "subscriptions/listen":
            pool = self._side_pool()
        if attachment is not None:
            headers = {**headers, "Content-Type": ATTACHMENT_MEDIA_TYPE}
            parts: list[Any] = frame(body, list(attachment))
        else:
            parts = [body]
        if self.auth is None:  # no coroutine more on the hot path
            conn = await self._exchange(pool, "POST", headers, parts)
        else:
            conn = await self._post(pool, headers, parts)
        status = conn.status
        response_headers = conn.headers
        try:
            if self._session_id is None:
                session_id = response_headers.get("mcp-session-id")
                if session_id is not None:
                    self._session_id = session_id
            content_type = response_headers.get("content-type", "")
            if content_type.startswith(EVENT_STREAM):
                version = headers.get("MCP-Protocol-Version")
                return await self._read_stream(pool, conn, request_id, on_message, version)
            if self.tensors and content_type.startswith(ATTACHMENT_MEDIA_TYPE):
                coding = response_headers.get("content-encoding")
                if coding is not None and coding.strip().lower() != "identity":
                    raise TensorFormatError(
                        f"a reply with an attachment came with Content-Encoding {coding}"
                    )
                buffer = await conn.framed()
                framed = True
            else:
                data = conn.whole_body() if conn.complete else await conn.body()
                framed = False
        except BaseException:
            conn.close()  # cancelled or failed: the server sees the disconnect
            pool.release(conn)
            raise
        pool.release(conn)
        if framed:
            message, received = split_framed(buffer, self.max_message_bytes)
            return reply_of(status, message, None, "")._replace(attachment=received)
        coding = response_headers.get("content-encoding")
        if coding is not None:
            data = decompress(data, coding, self.max_message_bytes)
        if status < 300:
            return reply_of(status, data, None, "")
        return reply_of(status, data, response_headers.get("retry-after"), conn.reason)

    async def send(self, body: bytes, *, headers: Mapping[str, str]) -> None:
        if self._pool is None:
            raise NotSent("the client is closed")
        pool = self._side_pool()
        headers = self._sending(headers)
        conn = await self._post(pool, headers, [body])
        try:
            data = await conn.body()
        except BaseException:
            conn.close()
            pool.release(conn)
            raise
        pool.release(conn)
        if conn.status >= 300:
            text = data[:500].decode("utf-8", "replace")
            raise RequestRejected(conn.status, text or conn.reason)

    # -- the I/O of the shared rules (:mod:`millimcp.client.http_rules`) ------------------

    def _live(self) -> bool:
        return self._pool is not None

    @contextlib.asynccontextmanager
    async def _get(self, headers: Mapping[str, str]) -> AsyncIterator[Stream]:
        pool = self._side_pool()
        conn = await self._exchange(pool, "GET", await self._auth_headers(headers), [])
        try:
            yield conn.status, conn.headers.get("content-type", ""), conn.chunks()
        finally:
            conn.close()
            pool.release(conn)

    async def _delete(self, headers: Mapping[str, str]) -> None:
        pool = self._pool
        assert pool is not None
        conn = await self._exchange(pool, "DELETE", await self._auth_headers(headers), [])
        try:
            await conn.body()
        finally:
            pool.release(conn)

    # -- authorization ----------------------------------------------------------------------

    async def _post(self, pool: Pool, headers: Mapping[str, str], parts: list[Any]) -> Connection:
        """POST ``parts``; with an authorizer, its token goes with the request and a challenge
        runs the flow and sends the same request again (the server refused it before doing
        anything), until the authorizer is exhausted (then the refusal is the answer)."""
        auth = self.auth
        if auth is None:
            return await self._exchange(pool, "POST", headers, parts)

        def send(sent: str | None) -> Awaitable[Connection]:
            sending = headers if sent is None else {**headers, "Authorization": sent}
            return self._exchange(pool, "POST", sending, parts)

        def drop(conn: Connection) -> None:
            conn.close()  # the refusal's body is not read: this connection is done
            pool.release(conn)

        return await auth.resend_until_settled(send, _status_and_challenge, drop)

    # -- one exchange -----------------------------------------------------------------------

    def _prefix(self, method: str, headers: Mapping[str, str]) -> bytes:
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        return (
            f"{method} {self._target} HTTP/1.1\r\nHost: {self._host_header}\r\n{lines}"
        ).encode()

    def _start(self, method: str, headers: Mapping[str, str]) -> bytes:
        """The request's head up to the value of its ``Content-Length`` (a GET's whole head):
        the link's headers, ``headers`` over them; encoded once per method and headers."""
        key = (method, tuple(headers.items()))
        start = self._heads.get(key)
        if start is None:
            _check(headers)
            lowered = {name.lower() for name in headers}
            kept = {k: v for k, v in self._base.items() if k.lower() not in lowered}
            lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            end = "\r\n" if method == "GET" else "Content-Length: "
            start = self._prefix(method, kept) + (lines + end).encode()
            if len(self._heads) >= _MAX_HEADS:
                self._heads.clear()
            self._heads[key] = start
        return start

    def _head(self, method: str, headers: Mapping[str, str], length: int) -> bytes:
        """The request's head: the link's headers, ``headers`` over them, the length."""
        start = self._start(method, headers)
        return start if method == "GET" else b"%s%d\r\n\r\n" % (start, length)

    async def _exchange(
        self, pool: Pool, method: str, headers: Mapping[str, str], body: Sequence[Any]
    ) -> Connection:
        """Send one request on a connection of ``pool`` and wait for its response's head."""
        if len(body) == 1 and type(body[0]) is bytes:
            data = body[0]
            length = len(data)
            if length < 65536:  # one buffer, one write
                parts: list[Any] = [
                    b"%s%d\r\n\r\n%s" % (self._start(method, headers), length, data)
                ]
            else:
                parts = [self._head(method, headers, length), data]
        else:
            length = sum(memoryview(part).nbytes for part in body)
            parts = [self._head(method, headers, length), *body]
        for _ in range(2):  # a kept-alive connection found closed before anything went out
            conn = pool.take()
            if conn is None:
                conn = await pool.acquire()
            try:
                head = conn.send(
                    parts, limit=self.max_message_bytes, framed_limit=self._framed_limit()
                )
            except NotSent:
                pool.release(conn)
                continue
            break
        else:
            raise NotSent(f"could not send to {self.url}: the connections closed")
        try:
            if conn.draining:
                await conn.drained()
            if not head.done():
                await head
            conn.check_head()
        except BaseException:
            conn.close()
            pool.release(conn)
            raise
        return conn

    def _framed_limit(self) -> int:
        return self.max_attachment_bytes if self.tensors else self.max_message_bytes

    # -- reading replies --------------------------------------------------------------------

    async def _read_stream(
        self,
        pool: Pool,
        conn: Connection,
        request_id: int | str,
        on_message: OnMessage,
        version: str | None,
    ) -> Reply:
        parser = SseParser(self.max_message_bytes)
        message = await find_response(conn.chunks(), parser, request_id, on_message)
        if message is not None:
            self._drain(pool, conn)
            return Reply(message, conn.status)
        pool.release(conn)
        return await self._resume(parser, request_id, on_message, version)

    def _drain(self, pool: Pool, conn: Connection) -> None:
        """Read the rest of a stream after its response, so that its connection goes back to
        the pool (the server ends the stream right after the response); a stream still open
        :data:`DRAIN_S` later is closed."""
        if conn.complete:
            conn.discard()
            pool.release(conn)
            return
        task = asyncio.get_running_loop().create_task(self._drain_later(pool, conn))
        self._keep(task)

    @staticmethod
    async def _drain_later(pool: Pool, conn: Connection) -> None:
        try:
            async with asyncio.timeout(DRAIN_S):
                async for _ in conn.chunks():
                    pass
        except (TimeoutError, ConnectionLost, asyncio.CancelledError):
            conn.close()
        pool.release(conn)


def _status_and_challenge(conn: Connection) -> tuple[int, str | None]:
    return conn.status, conn.headers.get("www-authenticate")
