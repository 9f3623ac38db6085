"""The handshake-era session lifecycle as a state machine (hypothesis), through the real
ASGI app in-process: initialize, notifications/initialized, calls, DELETE, in any order,
against a model of which sessions are alive."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from millimcp import Server
from millimcp.testing import http_scope

LEGACY = "2025-11-25"
HELLO = {
    "protocolVersion": LEGACY,
    "capabilities": {},
    "clientInfo": {"name": "machine", "version": "0"},
}


def make_server() -> Server:
    server = Server("machine")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    return server


class Lifecycle(RuleBasedStateMachine):
    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.app = make_server().asgi()
        self.alive: set[str] = set()
        self.ready: set[str] = set()
        self.ids = 0

    def teardown(self) -> None:
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

    @rule(target=sessions)
    def initialize(self) -> str:
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO}
        status, headers, data = self.request("POST", body, None)
        assert status == 200, data
        session = headers[b"mcp-session-id"].decode()
        assert session not in self.alive
        self.alive.add(session)
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
            self.alive.discard(session)
            self.ready.discard(session)
        else:
            assert status == 404, data

    @rule()
    def unknown_session(self) -> None:
        status, _, _ = self.request("DELETE", None, "no-such-session")
        assert status == 404

    @invariant()
    def the_store_holds_the_live_sessions(self) -> None:
        assert len(self.app.handler.sessions) == len(self.alive)


Lifecycle.TestCase.settings = settings(max_examples=25, stateful_step_count=15, deadline=None)
TestLifecycle = Lifecycle.TestCase
