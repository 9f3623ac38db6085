"""One line-framed peer (stdio): both eras on one connection.

A request with modern ``_meta`` is served statelessly; ``initialize`` makes the rest of
the connection a handshake-era session, whose server-to-client requests go out on the same
channel and whose answers come back on it (which era a line is:
:func:`millimcp.protocol.eras.classify_line`). ``notifications/cancelled`` cancels a request
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
from millimcp.protocol.eras import (
    HANDSHAKE,
    check_modern,
    classify_line,
    negotiate_handshake,
)
from millimcp.session.context import Context
from millimcp.session.inflight import Call, InFlight, cancelled_id
from millimcp.session.router import Route, Router
from millimcp.session.sessions import Session, SessionConfig

__all__ = ["LineConnection"]


class LineConnection:
    """Joins a line transport to a :class:`~millimcp.session.router.Router`; ``write`` sends
    one message."""

    def __init__(
        self,
        router: Router,
        write: Callable[[bytes], None],
        sessions: SessionConfig | None = None,
    ) -> None:
        self.router = router
        self.write = write
        self.config = sessions or SessionConfig()
        self.session: Session | None = None
        self.inflight = InFlight()

    def __repr__(self) -> str:
        era = "handshake" if self.session is not None else "modern"
        return f"<LineConnection {era} running={len(self.inflight)}>"

    async def emit(self, message: bytes) -> None:
        self.write(message)

    def handle_line(self, line: bytes) -> None:
        """Take one inbound message; a request starts a task, the rest is handled now."""
        request_id: Any = None
        try:
            method, request_id, params, route, message = self.router.admit(line)
            if route is None:
                assert message is not None
                self._take(method, message)
                return
            assert method is not None
            if request_id in self.inflight:
                raise InvalidRequest("Invalid request: this id is already in flight")
            ctx = self._context(method, request_id, params, route)
        except ProtocolError as exc:
            self.write(encode_error(request_id, exc))
            return
        call = Call()
        self.inflight.add(request_id, call)
        call.task = asyncio.get_running_loop().create_task(self._serve(route, params, ctx, call))

    def refuse_line(self, limit: int) -> None:
        """A line over the size limit was discarded unread."""
        self.write(
            encode_error(
                None, InvalidRequest(f"Invalid request: message longer than {limit} bytes")
            )
        )

    async def aclose(self, grace_s: float = 0.0) -> None:
        """Let running requests finish for ``grace_s``, then cancel the rest and wait."""
        tasks = self.inflight.tasks()
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
            self.inflight.cancel(cancelled_id(message))
        elif self.session is not None:
            self.session.on_notification(method, message)

    def _context(self, method: str, request_id: Any, params: Any, route: Route) -> Context:
        meta = params.meta
        if classify_line(method, None if meta is None else meta.protocol_version) != HANDSHAKE:
            check_modern(method, meta)
            if route.input_required and (params.request_state or params.input_responses):
                return self.router.mrtr.context(request_id, method, params, self.emit)
            return Context(request_id, method, meta, self.emit)
        if method == "initialize":
            version = negotiate_handshake(params.protocol_version, self.config.enabled)
            if self.session is not None:
                raise InvalidRequest("Invalid request: this connection is initialized already")
            self.session = Session(
                None, version, params.capabilities, params.client_info, self.config, self.write
            )
        session = self.session
        if session is None:
            if method == "ping":
                return Context(request_id, method, meta)
            raise InvalidParams(
                "Invalid params: send initialize first (handshake era), or _meta with "
                "io.modelcontextprotocol/protocolVersion (2026-07-28)"
            )
        if METHODS[method].era == "modern":
            raise MethodNotFound(f"Method not found: {method} (not in the handshake era)")
        ask = functools.partial(session.request, send=self.emit)
        return session.context(request_id, method, params, self.emit, ask)

    async def _serve(self, route: Route, params: Any, ctx: Context, call: Call) -> None:
        request_id: Any = ctx.request_id
        try:
            outcome = await self.router.run(route, params, ctx, call)
        finally:
            self.inflight.discard(request_id, call)
        if outcome is not None:  # None: cancelled by the client, no answer (the spec's rule)
            self.write(outcome[1])
