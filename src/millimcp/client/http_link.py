"""The Streamable HTTP link: JSON-RPC message bytes over an aiohttp keep-alive pool.

One :class:`HttpLink` talks to one MCP endpoint. Its pool holds up to
``Limits.connections`` connections (by default as many as calls may be in flight, so a
burst never waits for a socket), each kept alive for ``Limits.keepalive_expiry_s``; DNS
answers are cached and every socket has TCP_NODELAY (aiohttp sets it). Keep the expiry
below the server's own keep-alive timeout (millimcp serves 60 s): a connection the server
closes while a request is being written fails that request with
:class:`~millimcp.errors.ConnectionLost`, which is never retried for a call that is not
idempotent.

Replies come as one JSON body or as an SSE stream; both are read here, capped at
``max_message_bytes`` per message. Bodies are asked for with ``Accept-Encoding: zstd, gzip``
(zstd only when ``zstandard`` is installed) and decoded here, with the same cap on the
decoded size. Errors: a refused or timed-out connect is :class:`~millimcp.errors.NotSent`;
a connection that breaks after the request went out is
:class:`~millimcp.errors.ConnectionLost`; an HTTP refusal whose body is not a JSON-RPC
message is :class:`~millimcp.errors.RequestRejected`. A JSON-RPC error comes back as a
:class:`~millimcp.client.link.Reply` with its status, for the core to raise.

Cancelling :meth:`HttpLink.request` closes the response's connection, which is how the
server learns that the request is cancelled (both eras).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import aiohttp

from millimcp.client.http_body import post_data, read_body, read_framed
from millimcp.client.http_reply import (
    DEFAULT_MAX_ATTACHMENT_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DRAIN_S,
    base_headers,
    find_response,
    reply_of,
    retry_after_seconds,
)
from millimcp.client.http_rules import HttpRules, Stream
from millimcp.client.link import Attachment, OnMessage, Reply
from millimcp.codec import ATTACHMENT_MEDIA_TYPE, SseParser
from millimcp.errors import ConnectionLost, NotSent, RequestRejected
from millimcp.resilience.policy import Limits, Timeout

if TYPE_CHECKING:
    from millimcp.client.authorizer import Authorizer

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "HttpLink", "retry_after_seconds"]

log: Final = logging.getLogger("millimcp.client")

_DNS_TTL_S: Final = 300


class HttpLink(HttpRules):
    """A :class:`~millimcp.client.link.Link` to one Streamable HTTP endpoint."""

    kind: Literal["http", "stdio"] = "http"
    _broken = (aiohttp.ClientError,)
    _delete_errors = (aiohttp.ClientError, TimeoutError, OSError)

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
        super().__init__(
            url,
            limits=limits,
            timeout=timeout,
            max_message_bytes=max_message_bytes,
            tensors=tensors,
            max_attachment_bytes=max_attachment_bytes,
            auth=auth,
        )
        self.connections_opened = 0
        """Sockets the calls' pool opened (counted by its connector's socket factory: a connect
        attempt that failed counts too)."""
        self._exchanges = 0  # requests of the calls' pool that got an answer's headers
        self._ssl = ssl
        # User-Agent is set, not skipped: with skip_auto_headers aiohttp takes a slow path per
        # request (~9k instructions of ~470k per tools/call, benchmarks/client_overhead.py).
        self._base_headers = base_headers(tensors, headers)
        self._session: aiohttp.ClientSession | None = None
        self._side: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._session is not None else "new"
        return (
            f"<HttpLink {self.url} {state} opened={self.connections_opened} "
            f"reused={self.connections_reused} session={self._session_id is not None}>"
        )

    @property
    def connections_reused(self) -> int:
        """Requests of the calls' pool that went out on a connection an earlier one opened."""
        return max(0, self._exchanges - self.connections_opened)

    # -- Link -------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._session is not None:
            return
        self._session = self._new_session(self.limits.connections, counted=True)
        self._closed = False

    def _new_session(self, limit: int, *, counted: bool = False) -> aiohttp.ClientSession:
        # The counters come from the socket factory and the request paths, not from an
        # aiohttp TraceConfig: any trace config makes aiohttp build and send every trace
        # signal of every request (554k -> 475k instructions per tools/call without one,
        # benchmarks/client_overhead.py --instructions).
        # Limits.max_keepalive=0: no connection is kept (a new one per call). aiohttp keeps
        # no count of idle connections, so any other value only bounds their lifetime.
        reuse: dict[str, Any] = (
            {"force_close": True}
            if counted and self.limits.keepalive == 0
            else {"keepalive_timeout": self.limits.keepalive_expiry_s}
        )
        connector = aiohttp.TCPConnector(
            limit=limit,
            limit_per_host=0,
            **reuse,
            ttl_dns_cache=_DNS_TTL_S,
            ssl=self._ssl if self._ssl is not None else True,
            socket_factory=self._new_socket if counted else None,
        )
        return aiohttp.ClientSession(
            connector=connector,
            headers=self._base_headers,
            timeout=aiohttp.ClientTimeout(total=None, connect=self.timeout.connect),
            auto_decompress=False,
        )

    def _side_session(self) -> aiohttp.ClientSession:
        """The pool of what is not a call: long-lived streams (GET, ``subscriptions/listen``)
        and answers to the server's requests. Apart from the calls' pool, so that a call
        waiting for its answer to be POSTed never waits for its own connection. Its
        connections are not counted in :attr:`connections_opened`."""
        if self._side is None:
            self._side = self._new_session(0)
        return self._side

    async def _release(self) -> None:
        session, self._session = self._session, None
        side, self._side = self._side, None
        if session is not None:
            await session.close()
        if side is not None:
            await side.close()

    async def request(
        self,
        request_id: int | str,
        body: bytes,
        *,
        headers: Mapping[str, str],
        on_message: OnMessage,
        attachment: Attachment | None = None,
    ) -> Reply:
        session = self._session
        if session is None:
            raise NotSent("the client is closed")
        if self._session_id is not None:
            headers = {**headers, "Mcp-Session-Id": self._session_id}
        if headers.get("Mcp-Method") == "subscriptions/listen":
            session = self._side_session()
        if self.auth is not None:
            response = await self._authorized_post(session, body, attachment, headers)
        else:
            data, media_type = post_data(body, attachment)
            if media_type is not None:
                headers = {**headers, "Content-Type": media_type}
            response = await self._post(session, data, headers)
        if session is self._session:
            self._exchanges += 1
        try:
            if self._session_id is None:
                session_id = response.headers.get("Mcp-Session-Id")
                if session_id is not None:
                    self._session_id = session_id
            content_type = response.headers.get("Content-Type", "")
            if content_type.startswith("text/event-stream"):
                version = headers.get("MCP-Protocol-Version")
                return await self._read_stream(response, request_id, on_message, version)
            if self.tensors and content_type.startswith(ATTACHMENT_MEDIA_TYPE):
                message, received = await read_framed(
                    response, self.max_message_bytes, self.max_attachment_bytes
                )
                reply = reply_of(response.status, message, None, "")
                return reply._replace(attachment=received)
            data = await read_body(response, self.max_message_bytes)
        except asyncio.CancelledError:
            response.close()  # the server sees the disconnect: the request is cancelled
            raise
        except aiohttp.ClientError as exc:
            response.close()
            raise ConnectionLost(f"the connection to {self.url} broke: {exc!r}") from exc
        except BaseException:
            response.close()
            raise
        status = response.status
        if status < 300:
            return reply_of(status, data, None, "")
        return reply_of(status, data, response.headers.get("Retry-After"), response.reason or "")

    async def _post(
        self, session: aiohttp.ClientSession, data: Any, headers: Mapping[str, str]
    ) -> aiohttp.ClientResponse:
        try:
            return await session.post(self.url, data=data, headers=headers)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise NotSent(f"could not connect to {self.url}: {exc}") from exc
        except aiohttp.ClientError as exc:
            raise ConnectionLost(f"the connection to {self.url} broke: {exc!r}") from exc

    async def _authorized_post(
        self,
        session: aiohttp.ClientSession,
        body: bytes,
        attachment: Attachment | None,
        headers: Mapping[str, str],
    ) -> aiohttp.ClientResponse:
        """POST with the token; on a challenge run the flow and resend the same request (the
        server refused it before doing anything), until the authorizer is exhausted."""
        auth = self.auth
        assert auth is not None

        def send(sent: str | None) -> Awaitable[aiohttp.ClientResponse]:
            data, media_type = post_data(body, attachment)
            sending = dict(headers)
            if media_type is not None:
                sending["Content-Type"] = media_type
            if sent is not None:
                sending["Authorization"] = sent
            return self._post(session, data, sending)

        return await auth.resend_until_settled(send, _status_and_challenge, _close)

    async def send(self, body: bytes, *, headers: Mapping[str, str]) -> None:
        if self._session is None:
            raise NotSent("the client is closed")
        session = self._side_session()
        headers = self._sending(headers)
        for attempt in range(2):
            sent = await self._auth_headers(headers)
            if await self._send_once(session, body, sent, retry=attempt == 0):
                return

    async def _send_once(
        self,
        session: aiohttp.ClientSession,
        body: bytes,
        headers: Mapping[str, str],
        *,
        retry: bool,
    ) -> bool:
        """POST a notification or response; False when a challenge was met and the flow ran
        (send it again)."""
        try:
            async with session.post(self.url, data=body, headers=headers) as response:
                auth = self.auth
                if (
                    retry
                    and auth is not None
                    and auth.wants(response.status, response.headers.get("WWW-Authenticate"))
                    and await auth.challenge(
                        response.status,
                        response.headers.get("WWW-Authenticate"),
                        headers.get("Authorization"),
                    )
                ):
                    return False
                if response.status >= 300:
                    text = (await response.read())[:500].decode("utf-8", "replace")
                    raise RequestRejected(response.status, text or response.reason or "")
                return True
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise NotSent(f"could not connect to {self.url}: {exc}") from exc
        except aiohttp.ClientError as exc:
            raise ConnectionLost(f"the connection to {self.url} broke: {exc!r}") from exc

    # -- the I/O of the shared rules (:mod:`millimcp.client.http_rules`) ------------------

    def _live(self) -> bool:
        return self._session is not None

    @contextlib.asynccontextmanager
    async def _get(self, headers: Mapping[str, str]) -> AsyncIterator[Stream]:
        sending = await self._auth_headers(headers)
        async with self._side_session().get(self.url, headers=sending) as response:
            content_type = response.headers.get("Content-Type", "")
            yield response.status, content_type, response.content.iter_any()

    async def _delete(self, headers: Mapping[str, str]) -> None:
        session = self._session
        assert session is not None
        sending = await self._auth_headers(headers)
        async with session.delete(self.url, headers=sending) as response:
            self._exchanges += 1
            await response.read()

    # -- reading replies ----------------------------------------------------------------

    async def _read_stream(
        self,
        response: aiohttp.ClientResponse,
        request_id: int | str,
        on_message: OnMessage,
        version: str | None,
    ) -> Reply:
        parser = SseParser(self.max_message_bytes)
        message = await find_response(response.content.iter_any(), parser, request_id, on_message)
        if message is not None:
            self._drain(response)
            return Reply(message, response.status)
        return await self._resume(parser, request_id, on_message, version)

    def _drain(self, response: aiohttp.ClientResponse) -> None:
        """Read the rest of a stream after its response, so that its connection goes back to
        the pool (the server ends the stream right after the response); a stream still open
        a second later is closed."""
        if response.content.at_eof():
            response.release()
            return
        task = asyncio.get_running_loop().create_task(self._drain_later(response))
        self._keep(task)

    @staticmethod
    async def _drain_later(response: aiohttp.ClientResponse) -> None:
        try:
            async with asyncio.timeout(DRAIN_S):
                async for _ in response.content.iter_any():
                    pass
        except (TimeoutError, aiohttp.ClientError, asyncio.CancelledError):
            response.close()
            return
        response.release()

    # -- counters ----------------------------------------------------------------------------

    def _new_socket(self, addr_info: Any) -> socket.socket:
        family, type_, proto, _, _ = addr_info
        self.connections_opened += 1
        return socket.socket(family=family, type=type_, proto=proto)


def _status_and_challenge(response: aiohttp.ClientResponse) -> tuple[int, str | None]:
    return response.status, response.headers.get("WWW-Authenticate")


def _close(response: aiohttp.ClientResponse) -> None:
    response.close()
