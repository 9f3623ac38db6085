"""Handshake-era sessions: what an ``initialize`` opens, and the store that bounds them.

A :class:`Session` remembers what the handshake agreed (version, client capabilities and
identity), the session's own state (log level, resource subscriptions), the requests it
has in flight (for ``notifications/cancelled``), the server-to-client requests waiting for
an answer, and, over HTTP, its SSE streams: every event gets an id ``{stream}-{seq}`` and
the last ``events_per_stream`` events of each stream are kept, so a client that lost its
connection resumes with ``Last-Event-ID``.

The :class:`SessionStore` issues ids (``secrets.token_urlsafe``: 43 visible ASCII
characters, 256 random bits), caps the number of live sessions and ends the idle ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from millimcp.errors import SessionNotFound, ToolError, TooManySessions
from millimcp.protocol import Message, encode_request
from millimcp.protocol.jsonrpc import decode_error
from millimcp.protocol.types import (
    ClientCapabilities,
    Implementation,
    InputRequest,
    LoggingLevel,
    RequestId,
    RequestMeta,
)
from millimcp.session.context import Context
from millimcp.session.inflight import InFlight, cancelled_id

__all__ = ["EventStream", "Session", "SessionConfig", "SessionStore"]

_now = time.monotonic
"""The sessions' clock (module-level so that a test can move it forward)."""

Send = Callable[[bytes], Awaitable[None]]
"""Writes one message where the client will read it (an SSE stream, a stdio line)."""


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """Settings of the handshake era (2025-11-25, 2025-06-18, 2025-03-26)."""

    enabled: bool = True
    """Serve handshake-era clients at all; False answers ``initialize`` with an error."""
    stateless: bool = False
    """No ``Mcp-Session-Id``: each request stands alone and gets a JSON reply, so any
    replica behind a plain load balancer can answer. No GET stream, no server-to-client
    requests, no subscriptions."""
    max_sessions: int = 10_000
    """Live sessions at most; ``initialize`` beyond it gets HTTP 503 with Retry-After."""
    idle_timeout_s: float = 1800.0
    """A session with no request and no open stream for this long is ended."""
    events_per_stream: int = 256
    """Events kept per SSE stream for replay after ``Last-Event-ID``."""
    streams_per_session: int = 32
    """Streams remembered per session; the oldest ended one is forgotten first."""
    client_request_timeout_s: float = 300.0
    """How long a server-to-client request (sampling, elicitation, roots) waits."""
    retry_ms: int = 1000
    """The SSE ``retry`` field sent with each stream's priming event."""
    default_log_level: LoggingLevel | None = "info"
    """Level of ``notifications/message`` before the client sends ``logging/setLevel``."""


class EventStream:
    """One SSE stream of a session: numbered events, the last few kept for replay."""

    __slots__ = ("closed", "events", "key", "seq", "sink", "wakeup")

    def __init__(self, key: str, size: int) -> None:
        self.key = key
        self.seq = 0
        self.events: deque[tuple[int, bytes]] = deque(maxlen=size)
        self.closed = False
        self.sink: object | None = None
        """The connection serving the stream now, if any."""
        self.wakeup = asyncio.Event()

    def __repr__(self) -> str:
        return f"<EventStream {self.key} seq={self.seq} closed={self.closed}>"

    def event_id(self, seq: int) -> str:
        return f"{self.key}-{seq}"

    def push(self, message: bytes) -> int:
        """Record a message; returns its sequence number and wakes the stream's server."""
        self.seq += 1
        self.events.append((self.seq, message))
        self.wakeup.set()
        return self.seq

    def after(self, seq: int) -> list[tuple[int, bytes]]:
        return [event for event in self.events if event[0] > seq]

    def close(self) -> None:
        self.closed = True
        self.wakeup.set()


class Session:
    """One handshake-era session (HTTP) or process (stdio)."""

    def __init__(
        self,
        session_id: str | None,
        version: str,
        capabilities: ClientCapabilities,
        client_info: Implementation | None,
        config: SessionConfig,
        outbound: Callable[[bytes], None] | None = None,
    ) -> None:
        self.id = session_id
        self.version = version
        self.capabilities = capabilities
        self.client_info = client_info
        self.config = config
        self.log_level: LoggingLevel | None = config.default_log_level
        self.subscriptions: set[str] = set()
        self.initialized = False
        self.closed = False
        self.last_seen = _now()
        self.inflight = InFlight()
        """The client's requests being served, for ``notifications/cancelled``."""
        self.pending: dict[int, asyncio.Future[msgspec.Raw]] = {}
        self.streams: OrderedDict[str, EventStream] = OrderedDict()
        self.standalone: EventStream | None = None
        """The stream of the latest GET: where unsolicited messages go over HTTP."""
        self._outbound = outbound
        self._ids = itertools.count(1)
        self._stream_keys = itertools.count(1)
        self._meta = self._base_meta()

    def __repr__(self) -> str:
        return (
            f"<Session {self.version} running={len(self.inflight)} "
            f"pending={len(self.pending)} streams={len(self.streams)} closed={self.closed}>"
        )

    # -- what handlers see --------------------------------------------------------------

    def _base_meta(self) -> RequestMeta:
        return RequestMeta(
            protocol_version=self.version,
            client_capabilities=self.capabilities,
            client_info=self.client_info,
            log_level=self.log_level,
        )

    def meta_for(self, meta: RequestMeta | None) -> RequestMeta:
        """The request's ``_meta`` completed with what the handshake agreed."""
        if meta is None:
            return self._meta
        return msgspec.structs.replace(
            meta,
            protocol_version=self.version,
            client_capabilities=self.capabilities,
            client_info=self.client_info,
            log_level=self.log_level,
        )

    def context(
        self,
        request_id: Any,
        method: str,
        params: Any,
        emit: Send | None,
        ask: Callable[[InputRequest], Awaitable[msgspec.Raw]] | None,
    ) -> Context:
        """The context of a request in this session: ``_meta`` completed by the handshake."""
        meta = self.meta_for(params.meta)
        return Context(request_id, method, meta, emit, _ask=ask, session=self)

    def on_notification(self, method: str, message: Message) -> None:
        """A notification the client sent in this session."""
        if method == "notifications/initialized":
            self.initialized = True
        elif method == "notifications/cancelled":
            self.cancel(cancelled_id(message))

    def set_log_level(self, level: LoggingLevel) -> None:
        self.log_level = level
        self._meta = self._base_meta()

    def touch(self) -> None:
        self.last_seen = _now()

    # -- streams (HTTP) -----------------------------------------------------------------

    def open_stream(self, *, standalone: bool = False) -> EventStream:
        key = f"{'g' if standalone else 'p'}{next(self._stream_keys)}"
        stream = EventStream(key, self.config.events_per_stream)
        self.streams[key] = stream
        if len(self.streams) > self.config.streams_per_session:
            self._forget_a_stream()
        if standalone:
            if self.standalone is not None:
                self.standalone.close()
            self.standalone = stream
        return stream

    def _forget_a_stream(self) -> None:
        for key, stream in self.streams.items():
            if stream.closed and stream.sink is None:
                del self.streams[key]
                return
        self.streams.popitem(last=False)[1].close()

    def find_event(self, event_id: str) -> tuple[EventStream, int] | None:
        """The stream and position a ``Last-Event-ID`` names, if this session has them."""
        key, _, seq = event_id.rpartition("-")
        stream = self.streams.get(key)
        if stream is None or not seq.isdigit() or int(seq) > stream.seq:
            return None
        return stream, int(seq)

    # -- messages the server starts -----------------------------------------------------

    def post(self, message: bytes) -> None:
        """Send an unsolicited message (a notification not tied to a request)."""
        if self.closed:
            return
        if self._outbound is not None:
            self._outbound(message)
        elif self.standalone is not None and not self.standalone.closed:
            self.standalone.push(message)
        # else: over HTTP with no GET stream open, there is nowhere to send it.

    async def request(self, input_request: InputRequest, send: Send) -> msgspec.Raw:
        """Send a server-to-client request on ``send`` and wait for the client's answer."""
        request_id = next(self._ids)
        future: asyncio.Future[msgspec.Raw] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        method = type(input_request).__struct_config__.tag
        assert isinstance(method, str)
        try:
            await send(encode_request(request_id, method, input_request.params))
            async with asyncio.timeout(self.config.client_request_timeout_s):
                return await future
        except TimeoutError:
            raise ToolError(f"the client did not answer {method} in time") from None
        finally:
            self.pending.pop(request_id, None)

    def resolve(self, message: Message) -> None:
        """Hand a client's response to the server-to-client request it answers."""
        future = self.pending.get(message.id) if isinstance(message.id, int) else None
        if future is None or future.done():
            return  # late, duplicate or unknown: nothing waits for it
        if message.error:
            error = decode_error(message.error)
            future.set_exception(
                ToolError(f"the client answered with error {error.code}: {error.message}")
            )
        else:
            future.set_result(message.result)

    # -- requests the client started ----------------------------------------------------

    def cancel(self, request_id: RequestId | None) -> None:
        """``notifications/cancelled``: stop the request; it gets no answer."""
        self.inflight.cancel(request_id)

    def close(self) -> None:
        """End the session: cancel its work, fail its waits, end its streams."""
        if self.closed:
            return
        self.closed = True
        self.inflight.cancel_all()
        for future in self.pending.values():
            if not future.done():
                future.cancel()
        for stream in self.streams.values():
            stream.close()
        self.pending.clear()


class SessionStore:
    """Live handshake-era sessions by id, capped, with idle ones ended in the background."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self._sessions: dict[str, Session] = {}
        self._reaper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._sessions)

    def __repr__(self) -> str:
        return f"<SessionStore live={len(self._sessions)} max={self.config.max_sessions}>"

    def create(
        self,
        version: str,
        capabilities: ClientCapabilities,
        client_info: Implementation | None,
    ) -> Session:
        if len(self._sessions) >= self.config.max_sessions:
            self.reap()
            if len(self._sessions) >= self.config.max_sessions:
                raise TooManySessions(
                    "Too many sessions: the server's session limit is reached",
                    {"maxSessions": self.config.max_sessions},
                )
        session_id = secrets.token_urlsafe(32)
        session = Session(session_id, version, capabilities, client_info, self.config)
        self._sessions[session_id] = session
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())
        return session

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None or session.closed:
            raise SessionNotFound("Session not found")
        session.last_seen = _now()
        return session

    def end(self, session_id: str) -> None:
        session = self._sessions.pop(session_id, None)
        if session is None:
            raise SessionNotFound("Session not found")
        session.close()

    def reap(self) -> int:
        """End sessions idle for longer than the timeout; returns how many ended."""
        deadline = _now() - self.config.idle_timeout_s
        idle = [
            key
            for key, session in self._sessions.items()
            if session.last_seen < deadline
            and not session.inflight
            and (session.standalone is None or session.standalone.sink is None)
        ]
        for key in idle:
            self._sessions.pop(key).close()
        return len(idle)

    def end_streams(self) -> None:
        """End every session's GET streams (a drain); the sessions and their calls go on."""
        for session in self._sessions.values():
            for stream in session.streams.values():
                stream.close()

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    async def _reap_forever(self) -> None:
        period = min(max(self.config.idle_timeout_s / 4, 0.05), 60.0)
        try:
            while self._sessions:
                await asyncio.sleep(period)
                self.reap()
        finally:
            with contextlib.suppress(RuntimeError):
                if self._reaper is asyncio.current_task():
                    self._reaper = None
