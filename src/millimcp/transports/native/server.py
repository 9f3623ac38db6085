"""Listening, TLS, graceful shutdown and worker processes of the native front.

:class:`NativeServer` binds a listener (TLS through the loop's ``ssl``: an OpenSSL server
context, TLS 1.3 session tickets on, ALPN ``http/1.1``) and drives a
:class:`~millimcp.transports.native.front.NativeFront`. :meth:`NativeServer.drain` is the
graceful shutdown: stop accepting, answer health checks and new requests with 503, close idle
connections, end handshake-era GET streams cleanly, let in-flight calls finish for up to
``graceful_timeout_s``, then end what remains (streams with their last chunk) and close.

:func:`run_native` is the blocking entry point (``run_http(http="native")``, ``millimcp serve
--http native``): the app's lifespan around the listener, SIGTERM/SIGINT start the drain, exit
status 0. With ``workers > 1`` a :class:`~millimcp.transports.supervisor.Supervisor` forks that
many children that share one listening socket (a draining worker leaves the connections
queued on it to the others), restarts them one by one on SIGHUP, and stops them on
SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import ssl
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from millimcp.errors import ConfigurationError, MissingExtra
from millimcp.transports.http import StreamableHTTPApp
from millimcp.transports.native.connection import HttpConnection
from millimcp.transports.native.front import NativeFront
from millimcp.transports.native.wire import CHUNK_END, CLOCK

if TYPE_CHECKING:
    from millimcp.transports.auth_core import AuthCore

__all__ = [
    "NativeServer",
    "endpoint_of",
    "make_front",
    "run_native",
    "run_one",
    "serve_native",
    "tls_context",
]


def tls_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """A server context: TLS 1.2+, session tickets (OpenSSL's default), ALPN http/1.1.

    Files that cannot be read or do not hold a matching PEM pair raise
    :class:`~millimcp.errors.ConfigurationError` (one line in the CLI)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigurationError(
            f"cannot load the TLS certificate {certfile!r} and key {keyfile!r}: {reason}"
        ) from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    return context


class NativeServer:
    """One listener of the native front in the running event loop."""

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        reuse_port: bool = False,
        backlog: int = 2048,
        sock: socket.socket | None = None,
    ) -> None:
        self.app, self.auth = _require_endpoint(app)
        try:
            import httptools  # noqa: F401
        except ImportError:
            raise MissingExtra("serve", "the native HTTP front", "httptools") from None
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.reuse_port = reuse_port
        self.backlog = backlog
        self.sock = sock
        """A listening socket to serve (inherited from a supervisor) instead of binding."""
        self.front: NativeFront | None = None
        self._server: asyncio.Server | None = None
        self._ticker: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        front = make_front(self.app, self.auth, loop)
        self.front = front
        if self.sock is not None:
            self._server = await loop.create_server(
                lambda: HttpConnection(front),
                sock=self.sock,
                ssl=self.ssl_context,
                backlog=self.backlog,
            )
        else:
            self._server = await loop.create_server(
                lambda: HttpConnection(front),
                self.host,
                self.port,
                ssl=self.ssl_context,
                reuse_port=self.reuse_port or None,
                backlog=self.backlog,
            )
        sockets = self._server.sockets
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self._tick()

    def _tick(self) -> None:
        CLOCK.tick()
        front = self.front
        assert front is not None
        front.sweep()
        self._ticker = front.loop.call_later(front.tick_s, self._tick)

    @property
    def connections(self) -> int:
        return 0 if self.front is None else len(self.front.connections)

    async def drain(self, grace: float | None = None) -> None:
        """The graceful shutdown (see the module docstring); returns once all is closed."""
        front = self.front
        if front is None:
            return
        grace = self.app.config.graceful_timeout_s if grace is None else grace
        self.app.drain()  # the server's streams (subscriptions/listen) end with their result
        front.begin_drain()
        if self._server is not None:
            self._server.close()
        for conn in tuple(front.connections):
            current = conn.current
            if current is not None and current.method == "GET" and conn.exchange is not None:
                _end(conn)  # a session's GET stream: the client reconnects elsewhere
            else:
                conn.shutdown()
        if front.connections:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(front.emptied.wait(), grace)
        for conn in tuple(front.connections):
            _end(conn)
        await asyncio.sleep(0)
        for conn in tuple(front.connections):
            conn.abort()
        if self._ticker is not None:
            self._ticker.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    async def close(self) -> None:
        await self.drain(0.0)


def endpoint_of(app: Any) -> tuple[StreamableHTTPApp, AuthCore | None] | None:
    """What the native front serves of ``app``: a millimcp endpoint app (``server.asgi()``),
    with the rules of its auth gate when it is protected; None for any other ASGI app."""
    if isinstance(app, StreamableHTTPApp):
        return app, None
    core = getattr(app, "core", None)
    if core is not None and isinstance(getattr(app, "app", None), StreamableHTTPApp):
        from millimcp.transports.auth_core import AuthCore
        from millimcp.transports.auth_gate import AuthGate

        if isinstance(app, AuthGate) and isinstance(core, AuthCore):
            return app.app, core
    return None


def make_front(
    app: StreamableHTTPApp, auth: AuthCore | None, loop: asyncio.AbstractEventLoop
) -> NativeFront:
    """The front of one listener: guarded by ``auth`` when the endpoint is protected."""
    if auth is None:
        return NativeFront(app, loop)
    from millimcp.transports.native.guarded import GuardedFront

    return GuardedFront(app, loop, auth)


def _require_endpoint(app: Any) -> tuple[StreamableHTTPApp, AuthCore | None]:
    """Refuse, in one line, an app the native front cannot serve (it reads no ASGI)."""
    served = endpoint_of(app)
    if served is None:
        raise ConfigurationError(
            "the native front serves a millimcp endpoint app (server.asgi()), not "
            f"{type(app).__name__}: serve that with an ASGI server (--http uvicorn)"
        )
    return served


def _end(conn: HttpConnection) -> None:
    """End a connection's response cleanly: the last chunk of a stream, then close."""
    exchange = conn.exchange
    if exchange is not None and exchange.streaming and not exchange.finished:
        exchange.stop_keepalive()
        exchange.finished = True
        if exchange.chunked:
            conn.write(CHUNK_END)
    conn.close()


async def serve_native(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    ssl_context: ssl.SSLContext | None = None,
    reuse_port: bool = False,
    announce: bool = True,
    sock: socket.socket | None = None,
    on_ready: Callable[[], None] | None = None,
    lifeline: int | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT in the running loop, inside the app's lifespan; returns 0.

    ``sock``: a listening socket to serve instead of binding ``host:port``; ``on_ready`` is
    called once it listens; the end of the pipe ``lifeline`` (a supervisor's) stops it too.
    """
    endpoint, _ = _require_endpoint(app)
    lifespan = endpoint._lifespan
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    if lifeline is not None:
        loop.add_reader(lifeline, stop.set)
    server = NativeServer(
        app, host=host, port=port, ssl_context=ssl_context, reuse_port=reuse_port, sock=sock
    )
    context = lifespan() if lifespan is not None else contextlib.nullcontext()
    try:
        async with context:
            await _serve_until(server, stop, endpoint, host, ssl_context, announce, on_ready)
    finally:
        if lifeline is not None:
            loop.remove_reader(lifeline)
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signum)
    return 0


async def _serve_until(
    server: NativeServer,
    stop: asyncio.Event,
    app: StreamableHTTPApp,
    host: str,
    ssl_context: ssl.SSLContext | None,
    announce: bool,
    on_ready: Callable[[], None] | None,
) -> None:
    await server.start()
    if on_ready is not None:
        on_ready()
    if announce:
        scheme = "https" if ssl_context is not None else "http"
        path = app.config.path or "/"
        print(
            f"millimcp: serving {scheme}://{host}:{server.port}{path} (native, pid "
            f"{os.getpid()}); Ctrl-C or SIGTERM to stop",
            file=sys.stderr,
            flush=True,
        )
    await stop.wait()
    await server.drain()


def run_native(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    certfile: str | None = None,
    keyfile: str | None = None,
    banner: str | None = None,
) -> int:
    """Serve ``app`` until SIGTERM/SIGINT (blocking); ``workers`` processes share one socket
    (:class:`~millimcp.transports.supervisor.Supervisor`, forked: the app is built once)."""
    endpoint, _ = _require_endpoint(app)
    context = None
    if certfile is not None and keyfile is not None:
        context = tls_context(certfile, keyfile)
    from millimcp.transports.supervisor import ForkedWorker, Supervisor, listen, ready_signal

    sock = listen(host, port)  # a port in use: one ConfigurationError, not a traceback
    if workers <= 1:
        try:
            if banner is None:
                return run_one(app, host=host, sock=sock, ssl_context=context, announce=True)

            def announce() -> None:
                print(banner, file=sys.stderr, flush=True)

            return run_one(app, host=host, sock=sock, ssl_context=context, on_ready=announce)
        finally:
            sock.close()
    supervisor: Supervisor

    def spawn(ready: int, lifeline: int) -> ForkedWorker:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            code = 1
            try:
                supervisor.close_in_child()
                os.setpgid(0, 0)
                code = run_one(
                    app,
                    sock=sock,
                    ssl_context=context,
                    on_ready=ready_signal(ready),
                    lifeline=lifeline,
                )
            finally:
                os._exit(code)
        return ForkedWorker(pid)

    supervisor = Supervisor(
        spawn, workers, grace_s=endpoint.config.graceful_timeout_s, banner=banner
    )
    try:
        return supervisor.run()
    finally:
        sock.close()


def run_one(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    ssl_context: ssl.SSLContext | None = None,
    sock: socket.socket | None = None,
    on_ready: Callable[[], None] | None = None,
    lifeline: int | None = None,
    announce: bool = False,
) -> int:
    """One process of the native front on uvloop (when installed), blocking: ``host:port``,
    or the listening ``sock`` of a supervisor (see :func:`serve_native`)."""
    factory: Any = None
    with contextlib.suppress(ImportError):
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(
            serve_native(
                app,
                host=host,
                port=port,
                ssl_context=ssl_context,
                announce=announce,
                sock=sock,
                on_ready=on_ready,
                lifeline=lifeline,
            )
        )
