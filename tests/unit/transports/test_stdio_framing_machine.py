"""stdio framing as a state machine (hypothesis), through the real server on two pipes.

Lines of every kind are queued (valid requests, blank lines, invalid JSON, lines over
``max_line_bytes``), then written as one byte stream cut at arbitrary points, each piece
read by the server on its own: a message split across reads, several joined in one read, a
cut inside the newline's neighbourhood. After each write, the model's rules:

- every valid request is answered exactly once (its id, its result), nothing else is;
- a blank (whitespace-only) line is ignored;
- invalid JSON gets one parse error (-32700, no id), an oversized line one -32600 saying so,
  and these refusals come out in the order their lines went in;
- what follows a bad line is served as if it had not been there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from millimcp import Server
from millimcp.transports.stdio import StdioConfig

LIMIT = 256
"""The server's ``max_line_bytes`` here: small, so that oversized lines are cheap."""
MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}

server = Server("stdio-machine")


@server.tool()
async def echo(text: str) -> str:
    """Return the text."""
    return text


blanks = st.sampled_from([b"", b" ", b"\t", b"\r", b"  \r"])
garbage = st.binary(max_size=40).map(lambda raw: b"{bad" + raw.replace(b"\n", b"?"))
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n"), max_size=20)


class Framing(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        read_in, self.write_in = os.pipe()
        self.read_out, write_out = os.pipe()
        os.set_blocking(self.read_out, False)
        self.stdin = os.fdopen(read_in, "rb", buffering=0)
        self.stdout = os.fdopen(write_out, "wb", buffering=0)
        config = StdioConfig(max_line_bytes=LIMIT, protect_stdout=False, eof_grace_s=0.0)
        self.serving = self.loop.create_task(
            server.serve_stdio(config, stdin=self.stdin, stdout=self.stdout)
        )
        self.pending = bytearray()
        self.ids = 0
        self.expected: dict[int, Any] = {}
        """Answers due: id -> the result's text (None for ping)."""
        self.refusals: list[int] = []
        """Error codes due for bad lines, in order."""
        self.answered: dict[int, int] = {}
        self.refused: list[int] = []
        self.unread = b""

    def teardown(self) -> None:
        os.close(self.write_in)
        self.loop.run_until_complete(asyncio.wait_for(self.serving, 10))
        self.stdin.close()
        self.stdout.close()
        os.close(self.read_out)
        self.loop.close()

    # -- what is queued -------------------------------------------------------------------

    @rule(text=texts)
    def call(self, text: str) -> None:
        self.ids += 1
        params = {"name": "echo", "arguments": {"text": text}, "_meta": MODERN}
        message = {"jsonrpc": "2.0", "id": self.ids, "method": "tools/call", "params": params}
        line = json.dumps(message, ensure_ascii=False).encode()
        if len(line) > LIMIT:
            self.refusals.append(-32600)
        else:
            self.expected[self.ids] = text
        self.pending += line + b"\n"

    @rule()
    def ping(self) -> None:
        self.ids += 1
        self.expected[self.ids] = None
        self.pending += json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": "ping"}).encode()
        self.pending += b"\n"

    @rule(line=blanks)
    def blank(self, line: bytes) -> None:
        self.pending += line + b"\n"

    @rule(line=garbage)
    def invalid_json(self, line: bytes) -> None:
        self.refusals.append(-32700)
        self.pending += line + b"\n"

    @rule(extra=st.integers(1, 3 * LIMIT))
    def oversized(self, extra: int) -> None:
        self.refusals.append(-32600)
        self.pending += b'{"jsonrpc": "2.0", "id": 0, "method": "ping", "pad": "'
        self.pending += b"x" * (LIMIT + extra) + b'"}\n'

    # -- writing it ---------------------------------------------------------------------

    @rule(data=st.data())
    def write(self, data: st.DataObject) -> None:
        """Write what is queued, cut at arbitrary points, one piece per read."""
        size = len(self.pending)
        cuts = sorted(data.draw(st.sets(st.integers(1, max(1, size - 1)), max_size=8)))
        start = 0
        for cut in [*(c for c in cuts if c < size), size]:
            if cut > start:
                os.write(self.write_in, self.pending[start:cut])
                self.settle(lambda: False, rounds=3)
                start = cut
        self.pending.clear()
        due = len(self.expected) + len(self.refusals)
        self.settle(lambda: len(self.answered) + len(self.refused) >= due)

    def settle(self, done: Any, rounds: int = 2000) -> None:
        async def spin() -> None:
            for _ in range(rounds):
                self.read()
                if done():
                    return
                await asyncio.sleep(0.001 if rounds > 3 else 0)

        self.loop.run_until_complete(spin())
        self.read()

    def read(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self.unread += os.read(self.read_out, 1 << 20)
        *lines, self.unread = self.unread.split(b"\n")
        for line in lines:
            reply = json.loads(line)
            if "id" in reply:
                self.answered[reply["id"]] = self.answered.get(reply["id"], 0) + 1
                due = self.expected.get(reply["id"], "unexpected")
                assert due != "unexpected", reply
                if due is None:
                    assert reply["result"] == {}, reply
                else:
                    assert reply["result"]["content"][0]["text"] == due, reply
            else:
                self.refused.append(reply["error"]["code"])
                if reply["error"]["code"] == -32600:
                    assert f"longer than {LIMIT} bytes" in reply["error"]["message"]

    @invariant()
    def each_request_answered_once_and_refusals_in_order(self) -> None:
        if self.pending:
            return  # checked once written
        assert self.answered == dict.fromkeys(self.expected, 1)
        assert self.refused == self.refusals


Framing.TestCase.settings = settings(max_examples=30, stateful_step_count=20, deadline=None)
TestFraming = Framing.TestCase
