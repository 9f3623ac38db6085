"""One line-framed peer (stdio): both eras on one connection.

A request with modern ``_meta`` is served statelessly; ``initialize`` makes the rest of
the connection a handshake-era session, whose server-to-client requests go out on the same
channel and whose answers come back on it. ``notifications/cancelled`` cancels a request
in either era, and a cancelled request gets no answer. Requests run concurrently, each in
its own task; messages go out whole, one per line, in the order they are written.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from millimcp.errors import InvalidParams, InvalidRequest, MethodNotFound, ProtocolError
from millimcp.protocol import METHODS, Message, encode_error
from millimcp.protocol.types import RequestId
from millimcp.session.context import Context
from millimcp.session.dispatcher import (
    Dispatcher,
    Route,
    check_modern_meta,
    check_modern_version,
)
from millimcp.session.handshake import cancelled_request, handshake_context, on_notification
from millimcp.session.sessions import Session

__all__ = ["LineConnection"]


class LineConnection:
    """Joins a line transport to a :class:`Dispatcher`; ``write`` sends one message."""

    def __init__(self, dispatcher: Dispatcher, write: Callable[[bytes], None]) -> None:
        self.dispatcher = dispatcher
        self.write = write
        self.session: Session | None = None
        self.running: dict[RequestId, asyncio.Task[None]] = {}
        self.cancelled: set[RequestId] = set()

    def __repr__(self) -> str:
        era = "handshake" if self.session is not None else "modern"
        return f"<LineConnection {era} running={len(self.running)}>"

    async def emit(self, message: bytes) -> None:
        self.write(message)

    def handle_line(self, line: bytes) -> None:
        """Take one inbound message; a request starts a task, the rest is handled now."""
        request_id: Any = None
        try:
            method, request_id, params, route, message = self.dispatcher.admit(line)
            if route is None:
                assert message is not None
                self._take(method, message)
                return
            assert method is not None
            if request_id in self.running:
                raise InvalidRequest("Invalid request: this id is already in flight")
            ctx = self._context(method, request_id, params, route)
        except ProtocolError as exc:
            self.write(encode_error(request_id, exc))
            return
        task = asyncio.get_running_loop().create_task(self._serve(route, params, ctx))
        self.running[request_id] = task

    def refuse_line(self, limit: int) -> None:
        """A line over the size limit was discarded unread."""
        self.write(
            encode_error(
                None, InvalidRequest(f"Invalid request: message longer than {limit} bytes")
            )
        )

    async def aclose(self, grace_s: float = 0.0) -> None:
        """Let running requests finish for ``grace_s``, then cancel the rest and wait."""
        tasks = list(self.running.values())
        if tasks and grace_s > 0:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            tasks = list(pending)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.session is not None:
            self.session.close()

    def _take(self, method: str | None, message: Message) -> None:
        """A notification, or a response to one of our requests."""
        if method is None:
            if self.session is not None:
                self.session.resolve(message)
        elif method == "notifications/cancelled":
            request_id = cancelled_request(message)
            task = self.running.get(request_id) if request_id is not None else None
            if task is not None:
                self.cancelled.add(request_id)
                task.cancel()
        elif self.session is not None:
            on_notification(self.session, method, message)

    def _context(self, method: str, request_id: Any, params: Any, route: Route) -> Context:
        dispatcher = self.dispatcher
        meta = params.meta
        era = METHODS[method].era
        if method == "initialize":
            config = dispatcher.session_config
            version = dispatcher.handshake._negotiate(params.protocol_version)
            if self.session is not None:
                raise InvalidRequest("Invalid request: this connection is initialized already")
            self.session = Session(
                None, version, params.capabilities, params.client_info, config, self.write
            )
        elif era != "legacy" and meta is not None and meta.protocol_version is not None:
            check_modern_meta(meta)
            check_modern_version(meta.protocol_version)
            return dispatcher.modern_context(request_id, method, params, route, self.emit)
        session = self.session
        if session is None:
            if method == "ping":
                return Context(request_id, method, meta)
            raise InvalidParams(
                "Invalid params: send initialize first (handshake era), or _meta with "
                "io.modelcontextprotocol/protocolVersion (2026-07-28)"
            )
        if era == "modern":
            raise MethodNotFound(f"Method not found: {method} (not in the handshake era)")
        ask = functools.partial(session.request, send=self.emit)
        return handshake_context(request_id, method, params, session, self.emit, ask)

    async def _serve(self, route: Route, params: Any, ctx: Context) -> None:
        request_id: Any = ctx.request_id
        try:
            _, data, _ = await self.dispatcher.run(route, params, ctx)
        except asyncio.CancelledError:
            if request_id in self.cancelled:
                return  # cancelled by the client: no answer, as the spec says
            raise
        finally:
            self.running.pop(request_id, None)
            self.cancelled.discard(request_id)
        self.write(data)
