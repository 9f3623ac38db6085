"""The 2026-07-28 era over Streamable HTTP: stateless, every request stands alone.

The order of checks for a modern request: the endpoint decodes it (:mod:`millimcp.session.
http`: -32700, -32600, -32601 with HTTP 404, -32602) and checks it against its era and its
headers (:func:`millimcp.protocol.eras.check_modern`: -32601, -32020, -32602, -32022), then
the handler runs with a :class:`~millimcp.session.context.Context`; the answer is one JSON
   body, or an SSE stream when the handler sends something first (progress, log messages,
   ``subscriptions/listen``). If it runs past a short grace period, a watcher cancels it when
   the client disconnects (closing the stream is cancellation; see
   :mod:`millimcp.session.disconnects`).
"""

from __future__ import annotations

from asyncio import current_task, get_running_loop
from typing import Any

from millimcp.errors import ProtocolError
from millimcp.observe import TRACE, clock
from millimcp.protocol import McpHeaders, encode_error, encode_result
from millimcp.session.context import Context
from millimcp.session.disconnects import DisconnectSweeper
from millimcp.session.inflight import TASKS, Call
from millimcp.session.router import Outcome, Route, Router
from millimcp.transports.http import Exchange

__all__ = ["ModernHttp", "refuse"]


class ModernHttp:
    """Modern-era requests over HTTP, for the endpoint (:mod:`millimcp.session.http`)."""

    __slots__ = ("router", "sweeper")

    def __init__(self, router: Router, sweeper: DisconnectSweeper) -> None:
        self.router = router
        self.sweeper = sweeper

    def __repr__(self) -> str:
        return f"<ModernHttp {self.router!r}>"

    async def serve(
        self,
        method: str,
        request_id: Any,
        params: Any,
        route: Route,
        headers: McpHeaders,
        exchange: Exchange,
        t0: int,
    ) -> None:
        """Run a decoded modern request that passed its checks (steps 1 to 5, made by the
        endpoint), and answer it (step 6).

        A disconnect cancels the handler; the request then gets no answer.
        """
        router = self.router
        if route.input_required and (params.request_state or params.input_responses):
            try:
                ctx = router.mrtr.context(request_id, method, params, exchange.emit, headers)
            except ProtocolError as exc:
                await refuse(exchange, request_id, exc, t0)
                return
        else:
            ctx = Context(request_id, method, params.meta, exchange.emit, None, None, headers)
        ctx._source = exchange
        record = TRACE.begin(t0, method, params, request_id, headers) if t0 else None
        # asyncio.current_task(), without its Python frame on 3.11 (inflight.TASKS)
        task = current_task() if TASKS is None else TASKS.get(get_running_loop())
        call = Call(task, False, False, exchange)
        sweeper = self.sweeper
        sweeper.active.add(call)  # sweeper.enter, inlined: this is the hot path
        if sweeper.task is None:
            sweeper.start()
        short: bytes | None = None
        try:
            # Router.run, inlined (one coroutine fewer): the handler, then its outcome.
            result = await route.handler(params, ctx)
            if record is None and ctx._attachments is None:
                # Router.outcome without what cannot apply: untraced, no attachment, and a
                # modern version (no resultType to strip): a 200 with this body.
                short = encode_result(request_id, result)
                outcome: Outcome | None = None
            else:
                outcome = router.outcome(result, ctx, record)
        except BaseException as exc:
            outcome = router.failed(exc, route, params, ctx, call)
        finally:
            sweeper.active.discard(call)  # sweeper.leave, inlined
            if call.watcher is not None:
                call.watcher.cancel()
            if exchange.streaming:
                exchange.stop_keepalive()
        if short is not None:  # the common answer: nothing to add, nothing to observe
            if exchange.streaming:
                await exchange.send_event(short)
                await exchange.end_stream()
            else:
                await exchange.reply(200, short)
            return
        if outcome is None:  # the client went away; the request was cancelled
            if record is not None:  # observe: 499, the client closed the request
                record.status = 499
                TRACE.end(record)
            return
        status, body, extra, attachment, compressible = outcome
        if record is not None:  # observe: the encode stage ends
            record.encoded_at = clock()
            record.status = status
        if exchange.streaming:
            await exchange.send_event(body)
            await exchange.end_stream()
        else:
            await exchange.reply(status, body, extra, attachment, compressible, record)
        if record is not None:  # observe: the request is done
            TRACE.end(record)


async def refuse(exchange: Exchange, request_id: Any, error: ProtocolError, t0: int) -> None:
    """Answer a request refused before its handler ran with its JSON-RPC error."""
    if t0:  # observe
        TRACE.event("rejected", (str(error.http_status),))
    await exchange.reply(error.http_status, encode_error(request_id, error))
