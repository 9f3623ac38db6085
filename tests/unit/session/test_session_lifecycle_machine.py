"""The handshake-era session lifecycle as a state machine (hypothesis), through the real
ASGI app in-process: initialize, notifications/initialized, calls, DELETE, GET streams (open,
dropped, resumed with ``Last-Event-ID``), unsolicited notifications, and idle expiry (the
sessions' clock moved past ``idle_timeout_s``), in any order, against a model of which
sessions are alive and which events each one's client has seen.

The model of a GET stream: while one is connected, every notification the server sends the
session arrives on it, in order, once; a notification sent while none is connected is kept
on the session's last stream, and a GET with ``Last-Event-ID`` (the last id the client saw)
gets exactly the events it missed, then goes on as that stream. A second GET while one is
connected is refused (409), a ``Last-Event-ID`` the session never issued gets 400, an
ended session's GET 404 (and a connected stream ends when its session does). A session with
no stream connected and no request for ``idle_timeout_s`` is ended; one with a stream
connected is kept."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from millimcp import Server, ServerConfig
from millimcp.session import sessions as sessions_module
from millimcp.session.sessions import SessionConfig
from millimcp.testing import http_scope

LEGACY = "2025-11-25"
HELLO = {
    "protocolVersion": LEGACY,
    "capabilities": {},
    "clientInfo": {"name": "machine", "version": "0"},
}


IDLE_S = 60.0
"""The sessions' idle timeout; the machine's clock jumps past it in :meth:`Lifecycle.expire`."""


def make_server() -> Server:
    server = Server("machine", config=ServerConfig(sessions=SessionConfig(idle_timeout_s=IDLE_S)))

    @server.tool()
    async def echo(text: str) -> str:
        return text

    return server


class Clock:
    """The sessions' clock (``millimcp.session.sessions._now``), moved by the machine only."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Stream:
    """A GET stream in progress: its task, what arrived, and how to hang up."""

    task: asyncio.Task[None]
    hang_up: asyncio.Future[None]
    status: int = 0
    body: bytearray = field(default_factory=bytearray)

    def events(self) -> list[tuple[str, str]]:
        """(id, data) of each complete event, the priming one included."""
        found = []
        for block in bytes(self.body).decode().split("\n\n")[:-1]:
            lines = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
            found.append((lines.get("id", ""), lines.get("data", "")))
        return found


@dataclass
class Seen:
    """The model of one session's GET streams, as its client sees them."""

    stream: Stream | None = None
    """The GET stream connected now."""
    last_id: str | None = None
    """The last event id the client saw (where it would resume)."""
    missed: int = 0
    """Notifications sent while no stream was connected, kept for the resumption."""
    delivered: int = 0
    """Notifications the connected stream has carried so far."""
    opened: bool = False
    """The session has had a GET stream (its last one keeps what is sent meanwhile)."""


class Lifecycle(RuleBasedStateMachine):
    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.server = make_server()
        self.app = self.server.asgi()
        self.alive: set[str] = set()
        self.ready: set[str] = set()
        self.seen: dict[str, Seen] = {}
        self.ids = 0
        self.clock = Clock()
        self._real_clock = sessions_module._now
        sessions_module._now = self.clock

    def teardown(self) -> None:
        sessions_module._now = self._real_clock
        for seen in self.seen.values():
            if seen.stream is not None and not seen.stream.hang_up.done():
                seen.stream.hang_up.set_result(None)
        self.app.handler.close()
        pending = asyncio.all_tasks(self.loop)
        for task in pending:  # the sessions' background sweeper
            task.cancel()

        async def finish() -> None:
            await asyncio.gather(*pending, return_exceptions=True)

        self.loop.run_until_complete(finish())
        self.loop.close()

    def request(
        self, method: str, body: dict[str, Any] | None, session: str | None
    ) -> tuple[int, dict[bytes, bytes], bytes]:
        headers = [(b"mcp-protocol-version", LEGACY.encode())]
        if session is not None:
            headers.append((b"mcp-session-id", session.encode()))
        scope = http_scope(headers, method=method)
        payload = b"" if body is None else json.dumps(body).encode()
        sent: list[MutableMapping[str, Any]] = []

        async def receive() -> MutableMapping[str, Any]:
            return {"type": "http.request", "body": payload, "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        self.loop.run_until_complete(self.app(scope, receive, send))
        data = b"".join(m.get("body", b"") for m in sent[1:])
        return int(sent[0]["status"]), dict(sent[0]["headers"]), data

    @initialize(target=sessions)
    def streaming_session(self) -> str:
        """Each run starts with one session whose GET stream is open."""
        session = str(self.initialize())
        self.open_stream(session)
        return session

    @rule(target=sessions)
    def initialize(self) -> str:
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO}
        status, headers, data = self.request("POST", body, None)
        assert status == 200, data
        session = headers[b"mcp-session-id"].decode()
        assert session not in self.alive
        self.alive.add(session)
        self.seen[session] = Seen()
        return session

    @rule(session=sessions)
    def initialized(self, session: str) -> None:
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        status, _, data = self.request("POST", note, session)
        if session in self.alive:
            assert status == 202, data
            self.ready.add(session)
        else:
            assert status == 404, data

    @rule(session=sessions, text=st.text(max_size=8))
    def call(self, session: str, text: str) -> None:
        self.ids += 1
        params = {"name": "echo", "arguments": {"text": text}}
        body = {"jsonrpc": "2.0", "id": self.ids, "method": "tools/call", "params": params}
        status, _, data = self.request("POST", body, session)
        if session not in self.alive:
            assert status == 404, data
            return
        assert status == 200, data
        reply = json.loads(data)
        assert reply["id"] == self.ids
        assert reply["result"]["content"][0]["text"] == text

    @rule(session=sessions)
    def delete(self, session: str) -> None:
        status, _, data = self.request("DELETE", None, session)
        if session in self.alive:
            assert status == 200, data
            self.end(session)
        else:
            assert status == 404, data

    # -- GET streams and unsolicited notifications ------------------------------------------

    def end(self, session: str) -> None:
        """The model of a session that ended: its connected stream ends too."""
        self.alive.discard(session)
        self.ready.discard(session)
        seen = self.seen[session]
        stream = seen.stream
        if stream is not None:
            self.settle(lambda: stream.task.done())
            assert stream.task.done(), "a stream outlived its session"
            self.check_stream(seen)
            seen.stream = None

    def settle(self, done: Any = None, rounds: int = 200) -> None:
        """Run the loop until ``done()`` (or a few rounds when None)."""

        async def spin() -> None:
            for _ in range(rounds if done is not None else 5):
                if done is not None and done():
                    return
                await asyncio.sleep(0)

        self.loop.run_until_complete(spin())

    def get(self, session: str, last_id: str | None) -> Stream:
        headers = [
            (b"mcp-protocol-version", LEGACY.encode()),
            (b"mcp-session-id", session.encode()),
        ]
        headers.append((b"accept", b"text/event-stream"))
        if last_id is not None:
            headers.append((b"last-event-id", last_id.encode()))
        hang_up: asyncio.Future[None] = self.loop.create_future()
        stream: Stream

        async def receive() -> MutableMapping[str, Any]:
            await hang_up
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                stream.status = int(message["status"])
            else:
                stream.body += message.get("body", b"")

        task = self.loop.create_task(self.app(http_scope(headers, method="GET"), receive, send))
        stream = Stream(task, hang_up)
        self.settle(lambda: task.done() or stream.events())
        return stream

    def check_stream(self, seen: Seen) -> None:
        """What the connected stream carried: a priming event, then ``delivered`` events with
        the ids that follow it, each a tools/list_changed notification."""
        stream = seen.stream
        assert stream is not None
        events = stream.events()
        assert events, "no priming event"
        key, _, first = events[0][0].rpartition("-")
        notes = events[1:]
        assert len(notes) == seen.delivered, (len(notes), seen.delivered)
        for offset, (event_id, data) in enumerate(notes, 1):
            assert event_id == f"{key}-{int(first) + offset}"
            assert json.loads(data)["method"] == "notifications/tools/list_changed"
        seen.last_id = (notes[-1] if notes else events[0])[0]

    def arrived(self, seen: Seen) -> None:
        """Wait for the connected stream to carry what the model says, then check it."""
        stream = seen.stream
        assert stream is not None
        self.settle(lambda: len(stream.events()) > seen.delivered)
        self.check_stream(seen)

    @rule(session=sessions)
    def open_stream(self, session: str) -> None:
        seen = self.seen[session]
        stream = self.get(session, None)
        if session not in self.alive:
            assert stream.status == 404
            return
        if seen.stream is not None:
            assert stream.status == 409
            return
        assert stream.status == 200
        assert not stream.task.done()
        event("stream opened")
        seen.stream, seen.delivered, seen.missed, seen.opened = stream, 0, 0, True
        self.check_stream(seen)

    @rule()
    def announce(self) -> None:
        """The server tells every session that its tool list changed."""
        self.server.notify_list_changed("tools")
        for session in self.alive:
            seen = self.seen[session]
            if seen.stream is not None:
                seen.delivered += 1
            elif seen.opened:
                seen.missed += 1
        for session in self.alive:
            if self.seen[session].stream is not None:
                self.arrived(self.seen[session])

    def connected(self) -> list[str]:
        return sorted(session for session, seen in self.seen.items() if seen.stream is not None)

    def resumable(self) -> list[str]:
        return sorted(
            session
            for session in self.alive
            if self.seen[session].stream is None and self.seen[session].last_id is not None
        )

    @precondition(lambda self: self.connected())
    @rule(data=st.data())
    def drop_stream(self, data: st.DataObject) -> None:
        """The client's connection breaks (or it hangs up)."""
        self.hang_up(data.draw(st.sampled_from(self.connected())))

    def hang_up(self, session: str) -> None:
        seen = self.seen[session]
        stream = seen.stream
        assert stream is not None
        stream.hang_up.set_result(None)
        self.settle(lambda: stream.task.done())
        assert stream.task.done()
        self.check_stream(seen)
        seen.stream = None
        seen.missed = 0

    @precondition(lambda self: self.resumable())
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        """The client reconnects with the last event id it saw."""
        self.reconnect(data.draw(st.sampled_from(self.resumable())))

    @precondition(lambda self: self.connected())
    @rule(data=st.data(), meanwhile=st.integers(0, 3))
    def blip(self, data: st.DataObject, meanwhile: int) -> None:
        """The connection breaks, ``meanwhile`` notifications are sent, the client resumes."""
        session = data.draw(st.sampled_from(self.connected()))
        self.hang_up(session)
        for _ in range(meanwhile):
            self.announce()
        self.reconnect(session)

    def reconnect(self, session: str) -> None:
        seen = self.seen[session]
        assert seen.last_id is not None
        stream = self.get(session, seen.last_id)
        assert stream.status == 200, bytes(stream.body)
        self.settle(lambda: len(stream.events()) > seen.missed)
        event("resumed, events missed" if seen.missed else "resumed")
        seen.stream, seen.delivered, seen.missed = stream, seen.missed, 0
        self.check_stream(seen)

    @rule(session=sessions)
    def resume_unknown_event(self, session: str) -> None:
        stream = self.get(session, "no-such-stream-7")
        assert stream.status == (400 if session in self.alive else 404)

    @rule()
    def expire(self) -> None:
        """Time passes: the sessions idle for longer than the timeout end, not those with a
        stream connected."""
        self.clock.now += IDLE_S + 1
        self.app.handler.sessions.reap()  # what its background sweeper does every IDLE_S / 4
        for session in tuple(self.alive):
            if self.seen[session].stream is None:
                self.end(session)
            else:
                event("kept alive by its stream")

    @rule()
    def unknown_session(self) -> None:
        status, _, _ = self.request("DELETE", None, "no-such-session")
        assert status == 404

    @invariant()
    def the_store_holds_the_live_sessions(self) -> None:
        assert len(self.app.handler.sessions) == len(self.alive)


Lifecycle.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestLifecycle = Lifecycle.TestCase
