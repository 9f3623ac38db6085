"""A pool of keep-alive :class:`~millimcp.client.native.connection.Connection`\\ s to one origin.

At most ``limit`` connections exist at once (None: no cap); a caller beyond that waits, in
FIFO order, for one to come back. A connection comes back only when its response was read
whole and the server keeps it alive; up to ``keepalive`` of them wait idle, each for at most
``expiry_s`` (the most recently used is reused first, so the others expire). Every socket has
TCP_NODELAY. A connect that fails or takes longer than ``connect_timeout_s`` raises
:class:`~millimcp.errors.NotSent`.

TLS goes through the loop's ``ssl``. On the standard asyncio loop each new connection offers
the last TLS session the pool saw (:class:`ssl.SSLSession`, TLS 1.3 tickets included), so a
server that keeps tickets resumes it instead of a full handshake; :attr:`Pool.resumed` counts
the resumed handshakes.
"""

from __future__ import annotations

import asyncio
import collections
import ssl as ssl_module
from typing import Any, Final

from millimcp.client.native.connection import Connection
from millimcp.errors import NotSent

__all__ = ["Pool"]

_CHECK_AFTER_S: Final = 1.0
"""A connection idle for longer is polled before it is reused: a server's keep-alive timeout
(uvicorn's is 5 s) may have closed it while the loop was too busy to notice, and a request
written into it would be lost (:class:`~millimcp.errors.ConnectionLost`, not retried for a
call that is not idempotent)."""


class _Resuming:
    """What the loop is given as ``ssl=``: the pool's context, wrapping each new connection
    with the pool's last session. The standard loop only calls ``wrap_bio`` on it."""

    def __init__(self, context: ssl_module.SSLContext, session: ssl_module.SSLSession) -> None:
        self.context = context
        self.session = session

    def wrap_bio(
        self,
        incoming: ssl_module.MemoryBIO,
        outgoing: ssl_module.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | None = None,
    ) -> ssl_module.SSLObject:
        return self.context.wrap_bio(
            incoming,
            outgoing,
            server_side=server_side,
            server_hostname=server_hostname,
            session=self.session,
        )


class Pool:
    """Keep-alive connections to ``host:port`` (over TLS when ``ssl`` is a context)."""

    check_after_s: float = _CHECK_AFTER_S
    """Idle connections older than this are polled before reuse (:data:`_CHECK_AFTER_S`)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl: ssl_module.SSLContext | None,
        limit: int | None,
        keepalive: int,
        expiry_s: float,
        connect_timeout_s: float | None,
    ) -> None:
        self.host = host
        self.port = port
        self.ssl = ssl
        self.limit = limit
        self.keepalive = keepalive
        self.expiry_s = expiry_s
        self.connect_timeout_s = connect_timeout_s
        self.opened = 0
        """Connect attempts (a failed one counts too)."""
        self.reused = 0
        """Exchanges that went out on a connection an earlier exchange used."""
        self.resumed = 0
        """TLS handshakes that resumed an earlier session."""
        self._idle: list[Connection] = []
        self._busy: set[Connection] = set()
        self._connecting = 0
        self._waiters: collections.deque[asyncio.Future[Connection | None]] = collections.deque()
        self._session: ssl_module.SSLSession | None = None
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"<Pool {self.host}:{self.port} idle={len(self._idle)} busy={len(self._busy)} "
            f"opened={self.opened} reused={self.reused}>"
        )

    def take(self) -> Connection | None:
        """An idle connection ready for one exchange, without waiting (the hot path); None
        when none is idle (then :meth:`acquire`)."""
        if self._closed:
            raise NotSent("the client is closed")
        idle = self._idle
        if not idle:
            return None
        now = asyncio.get_running_loop().time()
        while idle:
            conn = idle.pop()
            idle_s = now - conn.idle_since
            if (
                conn.closed
                or idle_s > self.expiry_s
                or (idle_s > self.check_after_s and conn.stale())
            ):
                conn.close()
                continue
            self._busy.add(conn)
            self.reused += 1
            return conn
        return None

    async def acquire(self) -> Connection:
        """A connection ready for one exchange: an idle one, a new one, or (at the cap) the
        next one handed back."""
        conn = self.take()
        if conn is not None:
            return conn
        loop = asyncio.get_running_loop()
        reserved = False
        if self.limit is not None and len(self._busy) + self._connecting >= self.limit:
            waiter: asyncio.Future[Connection | None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                handed = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._pass_on(waiter.result())
                raise
            if handed is not None:  # still counted busy: handed over, never free
                self.reused += 1
                return handed
            if self._closed:
                raise NotSent("the client is closed")
            reserved = True  # the slot the releaser freed, counted as connecting
        return await self._connect(loop, reserved)

    def release(self, conn: Connection) -> None:
        """Take back a connection after its exchange: kept when its response was read whole
        and the server keeps it alive, else closed."""
        if conn.reusable and not conn.closed and not self._closed:
            if self.ssl is not None:
                self._remember_session(conn)
            if self._waiters and self._give(conn):
                return
            self._busy.discard(conn)
            if len(self._idle) < self.keepalive:
                conn.idle_since = asyncio.get_running_loop().time()
                self._idle.append(conn)
                return
        else:
            self._busy.discard(conn)
        conn.close()
        self._give(None)

    def close(self) -> None:
        """Close every connection, busy ones too; waiters get :class:`NotSent`."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in (*idle, *self._busy):
            conn.close()
        self._busy.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # -- inside ------------------------------------------------------------------------------

    def _give(self, conn: Connection | None) -> bool:
        """Hand ``conn`` (busy still), or a free slot (None, counted as connecting), to the
        first caller still waiting; False when nobody waits."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                if conn is None:
                    self._connecting += 1
                waiter.set_result(conn)
                return True
        return False

    def _pass_on(self, conn: Connection | None) -> None:
        """What a cancelled waiter was handed goes to the next one, else back."""
        if conn is None:
            self._connecting -= 1
        if self._give(conn) or conn is None:
            return
        self.release(conn)

    async def _connect(self, loop: asyncio.AbstractEventLoop, reserved: bool) -> Connection:
        self.opened += 1
        if not reserved:
            self._connecting += 1
        tls: Any = None
        if self.ssl is not None:
            tls = self.ssl
            if self._session is not None and type(loop).__module__.startswith("asyncio"):
                tls = _Resuming(self.ssl, self._session)
        connected = False
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await loop.create_connection(
                    lambda: Connection(loop),
                    self.host,
                    self.port,
                    ssl=tls,
                    server_hostname=self.host if tls is not None else None,
                )
            connected = True
        except (OSError, TimeoutError, ssl_module.SSLError) as exc:
            raise NotSent(f"could not connect to {self.host}:{self.port}: {exc!r}") from exc
        finally:
            self._connecting -= 1
            if not connected:  # failed or cancelled: the slot goes to the next waiter
                self._give(None)
        if self._closed:
            conn.close()
            raise NotSent("the client is closed")
        if tls is not None and conn.transport is not None:
            ssl_object = conn.transport.get_extra_info("ssl_object")
            if ssl_object is not None and ssl_object.session_reused:
                self.resumed += 1
        self._busy.add(conn)
        return conn

    def _remember_session(self, conn: Connection) -> None:
        if conn.transport is None:
            return
        ssl_object = conn.transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self._session = ssl_object.session
