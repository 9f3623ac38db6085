"""The Streamable HTTP rules both HTTP links share, over the I/O each link does its own way.

:class:`HttpRules` holds the session (the id the handshake era's server handed out, and the
protocol version sent with it), the handshake era's GET stream reconnected with
``Last-Event-ID``, the resumption of a response stream that ended before its response
(SEP-1699) and the ``DELETE`` that ends the session. A link supplies three things: whether
it is still open (:meth:`HttpRules._live`), a GET of the endpoint's stream
(:meth:`HttpRules._get`: its status, ``Content-Type`` and body chunks) and a ``DELETE``
(:meth:`HttpRules._delete`), with the errors its I/O raises when a connection breaks, and
how to let its pools go (:meth:`HttpRules._release`). Closing, the settings both links take
and the authorization header are here too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, ClassVar, Final

from millimcp.client.http_reply import (
    DELETE_TIMEOUT_S,
    GET_RETRIES,
    RESUME_DELAY_S,
    RESUMES,
    decode_or_none,
    find_response,
)
from millimcp.client.link import OnMessage, Reply
from millimcp.codec import SseParser
from millimcp.errors import ConnectionLost, FrameTooLarge
from millimcp.protocol import Message
from millimcp.resilience.policy import Limits, Timeout

if TYPE_CHECKING:
    from millimcp.client.authorizer import Authorizer

__all__ = ["EVENT_STREAM", "HttpRules", "Stream"]

log: Final = logging.getLogger("millimcp.client")

EVENT_STREAM: Final = "text/event-stream"

Stream = tuple[int, str, AsyncIterator[Any]]
"""A GET's answer: its status, its ``Content-Type`` and its body's chunks."""


class HttpRules:
    """The session, stream and resumption rules of an HTTP link (a base of both links)."""

    _broken: ClassVar[tuple[type[BaseException], ...]]
    """What the link's I/O raises when a connection fails or breaks."""
    _delete_errors: ClassVar[tuple[type[BaseException], ...]]
    """What a failed ``DELETE`` of the session may raise (logged, not raised)."""

    def __init__(
        self,
        url: str,
        *,
        limits: Limits | None,
        timeout: Timeout | None,
        max_message_bytes: int,
        tensors: bool,
        max_attachment_bytes: int,
        auth: Authorizer | None,
    ) -> None:
        self.url = url
        self.auth = auth
        """Authorization (``Client.over_http(auth=...)``): its header goes on every request,
        and a challenge (401, 403 ``insufficient_scope``) runs its flow and resends."""
        self.limits = limits or Limits()
        self.timeout = timeout or Timeout()
        self.max_message_bytes = max_message_bytes
        self.tensors = tensors
        """Raw tensors accepted (``dev.millimcp/tensor`` declared): framed bodies both ways."""
        self.max_attachment_bytes = max_attachment_bytes
        self._drains: set[asyncio.Task[None]] = set()
        """The tasks reading the rest of response streams (cancelled on close)."""
        self.stream_ready = asyncio.Event()
        """Set while the handshake era's GET stream is connected."""
        self._session_id: str | None = None
        self._version: str | None = None
        self._closed = False

    # -- what a link supplies ---------------------------------------------------------------

    def _live(self) -> bool:
        """The link is open (its calls' pool exists)."""
        raise NotImplementedError

    def _get(self, headers: Mapping[str, str]) -> AbstractAsyncContextManager[Stream]:
        """A GET of the endpoint (on the side pool) with ``headers``, open while in use."""
        raise NotImplementedError

    async def _delete(self, headers: Mapping[str, str]) -> None:
        """A DELETE of the endpoint with ``headers``, its body read."""
        raise NotImplementedError

    async def _release(self) -> None:
        """Let the link's pools go (closing, once the session is ended)."""
        raise NotImplementedError

    # -- closing ----------------------------------------------------------------------------

    async def close(self) -> None:
        """End the response streams' drains and the session (``DELETE``), then let the pools
        and the authorization go. Idempotent."""
        if not self._live() or self._closed:
            return
        self._closed = True
        await self._end_drains()
        try:
            if self._session_id is not None:
                await self._delete_session()
        finally:
            await self._release()
            if self.auth is not None:
                await self.auth.close()

    async def _auth_headers(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        """``headers`` with the authorization's current header (a token got first if none)."""
        if self.auth is None:
            return headers
        value = await self.auth.before()
        return headers if value is None else {**headers, "Authorization": value}

    # -- the session --------------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def reset_session(self) -> None:
        self._session_id = None

    def _sending(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        """The headers of a notification or a response to the server: their protocol version
        noted (the GET stream and the DELETE send it), the session's id added."""
        version = headers.get("MCP-Protocol-Version")
        if version is not None:
            self._version = version
        if self._session_id is None:
            return headers
        return {**headers, "Mcp-Session-Id": self._session_id}

    async def _delete_session(self) -> None:
        headers = {"Mcp-Session-Id": self._session_id or ""}
        if self._version is not None:
            headers["MCP-Protocol-Version"] = self._version
        self._session_id = None
        try:
            async with asyncio.timeout(DELETE_TIMEOUT_S):
                await self._delete(headers)
        except self._delete_errors as exc:
            log.debug("DELETE of the session failed: %r", exc)

    # -- draining ---------------------------------------------------------------------------

    def _keep(self, task: asyncio.Task[None]) -> None:
        """Hold a task that drains a stream until it ends (or :meth:`_end_drains`)."""
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)

    async def _end_drains(self) -> None:
        """Cancel the draining tasks and wait for them (each closes its stream)."""
        drains = tuple(self._drains)
        for task in drains:
            task.cancel()
        if drains:
            await asyncio.gather(*drains, return_exceptions=True)

    # -- streams ------------------------------------------------------------------------------

    async def unsolicited(self) -> AsyncIterator[Message]:
        """The handshake era's GET stream, reconnected with ``Last-Event-ID`` when it drops.

        Ends at once without a session (the modern era has no GET stream), when the server
        refuses the stream (405, 404: the session ended), after several failed reconnects in
        a row, or when the link closes.
        """
        broken: tuple[type[BaseException], ...] = (*self._broken, FrameTooLarge)
        last_id: str | None = None
        retry_s = 1.0
        failures = 0
        while not self._closed and self._live() and self._session_id is not None:
            headers = {"Accept": EVENT_STREAM, "Mcp-Session-Id": self._session_id}
            if self._version is not None:
                headers["MCP-Protocol-Version"] = self._version
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                async with self._get(headers) as (status, content_type, chunks):
                    if status != 200 or not content_type.startswith(EVENT_STREAM):
                        log.debug("GET stream refused: HTTP %d", status)
                        return
                    failures = 0
                    self.stream_ready.set()
                    parser = SseParser(self.max_message_bytes)
                    async for chunk in chunks:
                        for data in parser.feed(chunk):
                            message = decode_or_none(data)
                            if message is not None:
                                yield message
                        last_id = parser.last_id or last_id
                        if parser.retry_ms is not None:
                            retry_s = parser.retry_ms / 1000
            except broken as exc:
                failures += 1
                log.debug("GET stream broke (%r); reconnecting", exc)
                if failures > GET_RETRIES:
                    return
            finally:
                self.stream_ready.clear()
            await asyncio.sleep(retry_s)

    async def _resume(
        self, ended: SseParser, request_id: int | str, on_message: OnMessage, version: str | None
    ) -> Reply:
        """A response stream ended before its response: resume it (SEP-1699).

        Only a stream whose events carry ids can be resumed. After the ``retry`` the server
        set (else :data:`~millimcp.client.http_reply.RESUME_DELAY_S`), a GET with
        ``Last-Event-ID`` asks the server to send what followed that event, the response
        among it; up to :data:`~millimcp.client.http_reply.RESUMES` times.
        """
        last_id, retry_ms = ended.last_id, ended.retry_ms
        for _ in range(RESUMES):
            if last_id is None or not self._live():
                break
            await asyncio.sleep(RESUME_DELAY_S if retry_ms is None else retry_ms / 1000)
            headers = {"Accept": EVENT_STREAM, "Last-Event-ID": last_id}
            if version is not None:
                headers["MCP-Protocol-Version"] = version
            if self._session_id is not None:
                headers["Mcp-Session-Id"] = self._session_id
            parser = SseParser(self.max_message_bytes)
            try:
                async with self._get(headers) as (status, content_type, chunks):
                    if status != 200 or not content_type.startswith(EVENT_STREAM):
                        log.debug("resuming the stream refused: HTTP %d", status)
                        break
                    message = await find_response(chunks, parser, request_id, on_message)
                    if message is not None:
                        return Reply(message, status)
            except self._broken as exc:
                log.debug("resuming the stream failed (%r)", exc)
            last_id = parser.last_id or last_id
            retry_ms = parser.retry_ms if parser.retry_ms is not None else retry_ms
        raise ConnectionLost("the response stream ended before the response")
