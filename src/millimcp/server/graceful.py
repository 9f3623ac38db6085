"""uvicorn, shut down on purpose, with deadlines on slow clients.

**Shutdown.** SIGTERM or SIGINT drains the app, then uvicorn stops.

What :class:`GracefulServer` adds to uvicorn's own shutdown (stop accepting, let requests
in progress finish within ``timeout_graceful_shutdown``, then the lifespan's end):

- first, the app's ``drain()`` (:meth:`~millimcp.transports.http.StreamableHTTPApp.drain`):
  readiness turns 503, new requests on open connections get 503 with ``Retry-After``,
  ``subscriptions/listen`` and handshake-era GET streams end with their clean close, so
  that they do not hold the shutdown to its timeout;
- then the process exits with status 0: uvicorn re-raises the signal it caught once it is
  done (the process would die of it, status -15); a shutdown that went as planned is not
  a failure.

**Slow clients.** uvicorn times out only an idle kept-alive connection, from its first
response on (``timeout_keep_alive``); :func:`deadline_protocol` adds, on its httptools
protocol: the same idle deadline on a new connection that sends nothing, and
``header_timeout_s`` from a request's first byte to the end of its headers (then ``408``
and close). A slow *body* is the app's (:mod:`millimcp.transports.body`), open connections
are capped by uvicorn's ``limit_concurrency`` (503 past it, without ``Retry-After``).

**Idle connections while draining.** uvicorn's shutdown closes idle kept-alive connections
at once, and a request a client is writing into one at that moment is lost (the client
cannot tell it from a call that ran). :func:`deadline_protocol` closes one only once it has
been idle for :data:`~millimcp.transports.native.connection.DRAIN_IDLE_S`, the native
front's rule: a request that comes before then gets the draining 503 and its
``Connection: close``.

Imported only where uvicorn runs (it imports uvicorn). ``--workers N`` runs this server in
each worker (:mod:`millimcp.transports.supervisor`), so each drains the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

import uvicorn

from millimcp.transports.native.connection import DRAIN_IDLE_S

__all__ = ["GracefulServer", "deadline_protocol", "drain_target"]

_TIMED_OUT: Final = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
)


def drain_target(app: Any) -> Any:
    """The app inside uvicorn's middleware wrappers that has a ``drain()``, or None."""
    for _ in range(8):
        if app is None or callable(getattr(app, "drain", None)):
            return app
        app = getattr(app, "app", None)
    return None


class GracefulServer(uvicorn.Server):
    """A :class:`uvicorn.Server` that drains its app when told to stop, and exits 0."""

    banner: str | None = None
    """Printed to stderr once the server listens (``millimcp serve``'s start line)."""
    on_ready: Callable[[], None] | None = None
    """Called once the server listens (a supervisor's worker tells its supervisor)."""
    lifeline: int | None = None
    """A pipe's read end; its end (the supervisor is gone) stops the server as SIGTERM does."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        if self.lifeline is not None:
            lifeline = self.lifeline
            loop = asyncio.get_running_loop()

            def orphaned() -> None:
                loop.remove_reader(lifeline)
                self.handle_exit(signal.SIGTERM, None)

            loop.add_reader(lifeline, orphaned)
        if self.banner is not None:
            print(self.banner, file=sys.stderr, flush=True)
        if self.on_ready is not None:
            self.on_ready()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            target = drain_target(getattr(self.config, "loaded_app", None))
            if target is not None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    target.drain()
                else:
                    loop.call_soon_threadsafe(target.drain)
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        with contextlib.suppress(AttributeError):
            self._captured_signals.clear()  # done on purpose: do not die of the signal


def deadline_protocol(header_timeout_s: float) -> type[Any]:
    """uvicorn's httptools protocol with the deadlines above (pass it as ``http=``)."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class DeadlineProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None
        _idle_since: float = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._idle_since = self.loop.time()
            # Idle from the start: uvicorn's own timer runs only after a first response.
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._stop_header_timer()
            self._header_timer = self.loop.call_later(header_timeout_s, self._headers_too_slow)

        def on_headers_complete(self) -> None:
            self._stop_header_timer()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            self._idle_since = self.loop.time()
            super().on_response_complete()

        def shutdown(self) -> None:
            """Draining: an idle connection closes once idle for ``DRAIN_IDLE_S``."""
            idle = self.cycle is None or self.cycle.response_complete
            wait = self._idle_since + DRAIN_IDLE_S - self.loop.time()
            if not idle or wait <= 0:
                super().shutdown()
            else:
                self.loop.call_later(wait, self._drained_idle)

        def _drained_idle(self) -> None:
            if not self.transport.is_closing():
                super().shutdown()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_header_timer()
            self._unset_keepalive_if_required()
            super().connection_lost(exc)

        def _stop_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.write(_TIMED_OUT)
                self.transport.close()

    return DeadlineProtocol
