"""How the client core reaches one server: a :class:`Link` moves JSON-RPC message bytes.

The client core (era detection, MRTR, retries, deadlines, caps) builds each message as bytes
and hands it to a link; the link moves it and gives back the decoded envelope
(:class:`~millimcp.protocol.Message`, ``params``/``result``/``error`` still raw). Three links
exist: Streamable HTTP over an aiohttp pool (``millimcp.client.http_link``), a subprocess
speaking newline-delimited JSON on its stdin/stdout (``millimcp.client.stdio_link``), and an
ASGI app called in-process (``millimcp.client.asgi_link``, for tests).

Binary attachments (the ``dev.millimcp/tensor`` extension) travel beside the message, never
inside it: :meth:`Link.request` takes the request's attachment as ``attachment=`` (a list of
buffers, sent from their own memory in the extension's framing) and a framed reply's
attachment comes back in :attr:`Reply.attachment`. Only HTTP links move attachments; what one
holds is not the link's business.

Errors a link raises (all in :mod:`millimcp.errors`):

- :class:`~millimcp.errors.NotSent`: the request certainly never reached the server
  (connect refused, DNS failure, process not started). Always safe to retry.
- :class:`~millimcp.errors.ConnectionLost`: the connection broke after the request may have
  reached the server (reset mid-response, process exited). Retried only for idempotent calls.
- :class:`~millimcp.errors.RequestRejected`: an HTTP refusal whose body is not a JSON-RPC
  message (``status`` set; e.g. 403, 413, 502 from a proxy).

A JSON-RPC error response is *not* raised by the link: it comes back as a :class:`Reply`
whose ``message.error`` is set, with the HTTP status and ``Retry-After`` beside it, so the
retry policy can read both.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, Protocol

from millimcp.protocol import Message

__all__ = ["Attachment", "Link", "OnMessage", "Reply"]

OnMessage = Callable[[Message], Awaitable[None]]
"""Called, in arrival order, with each message that arrives on a request's own HTTP response
stream but is not its response: ``notifications/progress``, ``notifications/message``, and
(handshake era) server-to-client requests such as ``elicitation/create``. The core answers a
server-to-client request with :meth:`Link.send`. Over stdio nothing on the wire ties a message
to a request, so the stdio link never calls it: every non-response message goes to
:meth:`Link.unsolicited`, and the core routes progress by the ``progressToken`` it chose."""

Attachment = Sequence[Any]
"""A request's binary attachment: buffers (``bytes``, ``memoryview``, anything with the buffer
protocol) sent one after the other, never joined."""


class Reply(NamedTuple):
    """The response to one request."""

    message: Message
    """The JSON-RPC response: ``result`` or ``error`` set (raw)."""
    status: int = 200
    """The HTTP status the response came with (200 for stdio)."""
    retry_after_s: float | None = None
    """``Retry-After`` in seconds, when the server sent one (delta-seconds or an HTTP date)."""
    attachment: memoryview | None = None
    """The binary attachment of a framed reply (a view of one writable buffer, not copied);
    None for every other reply."""


class Link(Protocol):
    """One server, as the client core sees it."""

    kind: Literal["http", "stdio"]
    """``"http"``: Streamable HTTP semantics (MCP headers, sessions, a GET stream,
    attachments); ``"stdio"``: one connection, no headers."""

    async def open(self) -> None:
        """Connect (HTTP: build the pool; stdio: start the process). Raises NotSent."""

    async def close(self) -> None:
        """Release everything: pool and streams, or the process (stdin closed, then
        terminate, then kill after a grace period). Idempotent."""

    async def request(
        self,
        request_id: int | str,
        body: bytes,
        *,
        headers: Mapping[str, str],
        on_message: OnMessage,
        attachment: Attachment | None = None,
    ) -> Reply:
        """Send one request (``body`` is the whole JSON-RPC message) and wait for its response.

        ``headers`` are the MCP HTTP headers the core computed (``MCP-Protocol-Version``,
        ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``); the stdio link ignores them.
        Messages for this request that arrive before the response go to ``on_message``.
        ``attachment`` (HTTP only) is sent with the body in the ``dev.millimcp/tensor``
        framing; a framed reply's attachment comes back in :attr:`Reply.attachment`.

        Cancelling the awaiting task cancels the request on the server: the HTTP link closes
        the response (the server sees the disconnect), the stdio link sends
        ``notifications/cancelled`` with ``request_id``.
        """
        ...

    async def send(self, body: bytes, *, headers: Mapping[str, str]) -> None:
        """Send a message that has no response: a notification, or the answer to a
        server-to-client request (handshake era)."""

    def unsolicited(self) -> AsyncIterator[Message]:
        """Messages the server starts outside any request: over HTTP, the handshake era's GET
        stream (opened on first iteration, reconnected with ``Last-Event-ID``); over stdio,
        every message that is not a response. One consumer at a time (the core runs it as a
        background task). Ends when the link closes."""
        ...

    @property
    def stream_ready(self) -> asyncio.Event:
        """Set while :meth:`unsolicited` is connected: over HTTP while the GET stream is up;
        over stdio from open to close (the process's stdout is that stream)."""
        ...

    @property
    def session_id(self) -> str | None:
        """HTTP handshake era: the ``Mcp-Session-Id`` the server assigned (the link captures it
        from the ``initialize`` reply and sends it on every later request). Else None."""
        ...

    def reset_session(self) -> None:
        """Forget the session id (after a 404 / -32001, before initializing again)."""
