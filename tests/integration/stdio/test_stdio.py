"""stdio: `millimcp serve tests.servers.basic_server:server --stdio` as a real subprocess."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millimcp.protocol.types import META_CLIENT_CAPABILITIES, META_LOG_LEVEL
from millimcp.testing import modern_meta

ROOT = Path(__file__).resolve().parents[3]
MODERN_META = modern_meta()
HELLO = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"elicitation": {}},
    "clientInfo": {"name": "millimcp-tests", "version": "0"},
}


class Peer:
    """The client end of a stdio server: one JSON message per line each way."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "millimcp", "serve", "tests.servers.basic_server:server"]
        self.process = subprocess.Popen(
            [*command, "--stdio"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.raw: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        try:
            for line in self.process.stdout:
                self.raw.append(line)
                self.lines.put(line)
        except ValueError:  # closed by the fixture
            return

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message).encode() + b"\n")

    def recv(self, timeout: float = 20.0) -> dict[str, Any]:
        return dict(json.loads(self.lines.get(timeout=timeout)))

    def call(self, request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = self.recv()
            if message.get("id") == request_id and "method" not in message:
                return message

    def modern_tool(self, request_id: int, name: str, **arguments: Any) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments, "_meta": MODERN_META}
        return self.call(request_id, "tools/call", params)

    def close(self) -> int:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=10)
        finally:
            if self.process.poll() is None:
                self.process.kill()


@pytest.fixture
def peer() -> Iterator[Peer]:
    client = Peer()
    yield client
    process = client.process
    if process.poll() is None:
        process.kill()
    process.wait()
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def test_both_eras_in_one_process(peer: Peer) -> None:
    discovered = peer.call(1, "server/discover", {"_meta": MODERN_META})
    assert discovered["result"]["supportedVersions"] == ["2026-07-28"]
    assert peer.modern_tool(2, "echo", text="modern")["result"]["content"][0]["text"] == "modern"
    # Before initialize, a request without modern _meta is refused (and ping is fine).
    refused = peer.call(3, "tools/list", {})
    assert refused["error"]["code"] == -32602
    assert peer.call(4, "ping", {})["result"] == {}
    opened = peer.call(5, "initialize", HELLO)["result"]
    assert opened["protocolVersion"] == "2025-11-25"
    assert opened["serverInfo"]["name"] == "basic-test-server"
    peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    echoed = peer.call(6, "tools/call", {"name": "echo", "arguments": {"text": "legacy"}})
    assert echoed["result"]["content"][0]["text"] == "legacy"
    assert "resultType" not in echoed["result"]
    again = peer.call(7, "initialize", HELLO)
    assert again["error"]["code"] == -32600
    assert peer.close() == 0


def test_elicitation_goes_out_as_a_request_and_comes_back_as_a_response(peer: Peer) -> None:
    peer.call(1, "initialize", HELLO)
    peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask_name"}})
    ask = peer.recv()
    assert ask["method"] == "elicitation/create"
    assert ask["params"]["message"] == "Your name?"
    answer = {"action": "accept", "content": {"name": "Grace"}}
    peer.send({"jsonrpc": "2.0", "id": ask["id"], "result": answer})
    final = peer.recv()
    assert final["id"] == 2
    assert final["result"]["content"][0]["text"] == "hello Grace"
    # The modern era asks through MRTR instead: an input_required result.
    caps = modern_meta({META_CLIENT_CAPABILITIES: {"elicitation": {}}})
    params = {"name": "ask_name", "arguments": {}, "_meta": caps}
    modern = peer.call(3, "tools/call", params)
    assert modern["result"]["resultType"] == "input_required"


def test_progress_and_logs_are_notifications_on_stdout(peer: Peer) -> None:
    meta = modern_meta({"progressToken": "t", META_LOG_LEVEL: "info"})
    params = {"name": "progress", "arguments": {"steps": 3}, "_meta": meta}
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    seen = [peer.recv() for _ in range(7)]
    methods = [m.get("method") for m in seen]
    assert methods.count("notifications/progress") == 3
    assert methods.count("notifications/message") == 3
    assert seen[-1]["result"]["content"][0]["text"] == "3 steps"


def test_cancelled_requests_stop_and_get_no_answer(peer: Peer) -> None:
    for request_id, era in ((1, "modern"), (3, "legacy")):
        arguments = {"seconds": 30, "tag": f"{era}-cancel"}
        params: dict[str, Any] = {"name": "slow", "arguments": arguments}
        if era == "modern":
            params["_meta"] = MODERN_META
        else:
            peer.call(2, "initialize", HELLO)
        peer.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
        # Requests start in order: once a later one is answered, the slow one is running.
        assert peer.modern_tool(20 + request_id, "echo", text="ok")["result"]
        cancelled = {"requestId": request_id, "reason": "no longer needed"}
        peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled})
        for _ in range(100):
            tags = peer.modern_tool(10 + request_id, "cancelled_tags")
            if f"{era}-cancel" in tags["result"]["structuredContent"]["result"]:
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"the {era} call was not cancelled")
    assert peer.close() == 0
    answered = [json.loads(line).get("id") for line in peer.raw]
    assert 1 not in answered
    assert 3 not in answered


def test_bad_lines_get_errors_and_the_server_stays_up(peer: Peer) -> None:
    peer.write(b"{not json\n")
    parse = peer.recv()
    assert parse["error"]["code"] == -32700
    assert "id" not in parse
    peer.write(b'{"jsonrpc": "2.0", "id": 1, "method": "no/such/method", "params": {}}\n')
    assert peer.recv()["error"]["code"] == -32601
    # 100 MB on one line: discarded as it streams in, then one error for it.
    chunk = b"x" * (1024 * 1024)
    for _ in range(100):
        peer.write(chunk)
    peer.write(b"\n")
    huge = peer.recv(timeout=60)
    assert huge["error"]["code"] == -32600
    assert "longer than" in huge["error"]["message"]
    assert peer.modern_tool(2, "echo", text="alive")["result"]["content"][0]["text"] == "alive"
    rss_kb = _rss_kb(peer.process.pid)
    assert rss_kb < 300_000, f"the server buffered the line: {rss_kb} kB"


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def test_stdout_carries_only_protocol_messages(peer: Peer) -> None:
    shouted = peer.modern_tool(1, "shout", text="hey")
    assert shouted["result"]["content"][0]["text"] == "HEY"
    assert peer.modern_tool(2, "echo", text="after")["result"]["content"][0]["text"] == "after"
    assert peer.close() == 0
    for line in peer.raw:
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert peer.process.stderr is not None
    assert b"SHOUT hey" in peer.process.stderr.read()


def test_eof_ends_the_server_at_once_even_with_a_blocking_tool_running(peer: Peer) -> None:
    params = {"name": "block", "arguments": {"seconds": 30}, "_meta": MODERN_META}
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    time.sleep(0.5)
    started = time.monotonic()
    assert peer.close() == 0
    assert time.monotonic() - started < 8


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_server_cleanly(peer: Peer, signum: int) -> None:
    assert peer.modern_tool(1, "echo", text="up")["result"]["content"][0]["text"] == "up"
    peer.process.send_signal(signum)
    assert peer.process.wait(timeout=10) == 0
    assert peer.process.stderr is not None
    assert b"Traceback" not in peer.process.stderr.read()


def test_regular_files_on_both_ends(tmp_path: Path) -> None:
    """stdin and stdout redirected to files (no pipes): the thread reader, the plain writer."""
    requests = tmp_path / "in.jsonl"
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": MODERN_META}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "from a file"}, "_meta": MODERN_META},
        },
    ]
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
    answers = tmp_path / "out.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "millimcp", "serve", "tests.servers.basic_server:server"]
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            [*command, "--stdio"], cwd=ROOT, env=env, stdin=stdin, stdout=stdout, timeout=60
        )
    assert done.returncode == 0
    replies = {m["id"]: m for m in map(json.loads, answers.read_text().splitlines())}
    assert replies[1]["result"]["supportedVersions"] == ["2026-07-28"]
    assert replies[2]["result"]["content"][0]["text"] == "from a file"


ASYNCIO_STDIO = [  # the standard event loop (serve_stdio inside asyncio.run, as compat's 2.x
    sys.executable,  # run_stdio_async does), where the refusal used to be a 60 s hang
    "-c",
    "import asyncio; from tests.servers.basic_server import server; "
    "asyncio.run(server.serve_stdio())",
]


@pytest.mark.parametrize(
    ("stdout", "loop"), [("pipe", "default"), ("devnull", "default"), ("pipe", "asyncio")]
)
def test_dev_null_stdin_is_eof_at_once(stdout: str, loop: str) -> None:
    """``millimcp serve --stdio < /dev/null``: epoll refuses /dev/null (PermissionError in the
    loop's add_reader callback), which used to leave the server waiting for input that could
    never come (uvloop, with stdout on /dev/null too, aborted); now it reads from a thread,
    sees EOF and exits 0."""
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath}
    command = [sys.executable, "-m", "millimcp", "serve", "tests.servers.basic_server:server"]
    with open(os.devnull, "rb") as stdin, open(os.devnull, "wb") as devnull:
        done = subprocess.run(
            ASYNCIO_STDIO if loop == "asyncio" else [*command, "--stdio"],
            cwd=ROOT,
            env=env,
            stdin=stdin,
            stdout=devnull if stdout == "devnull" else subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert b"PermissionError" not in done.stderr
    assert not done.stdout


def test_requests_written_just_before_eof_are_still_answered(peer: Peer) -> None:
    params = {"name": "slow", "arguments": {"seconds": 0.3, "tag": "eof"}, "_meta": MODERN_META}
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    assert peer.close() == 0  # stdin closed right after the request
    replies = [json.loads(line) for line in peer.raw]
    assert [r["result"]["content"][0]["text"] for r in replies if r.get("id") == 1] == ["done"]


def test_sigterm_lets_a_call_in_progress_finish(peer: Peer) -> None:
    params = {"name": "slow", "arguments": {"seconds": 0.3, "tag": "term"}, "_meta": MODERN_META}
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    assert peer.modern_tool(2, "echo", text="read")["result"]["content"][0]["text"] == "read"
    peer.process.send_signal(signal.SIGTERM)  # the slow call was read before the echo
    assert peer.process.wait(timeout=10) == 0
    time.sleep(0.1)  # the reader thread takes the last lines
    replies = [json.loads(line) for line in peer.raw]
    assert [r["result"]["content"][0]["text"] for r in replies if r.get("id") == 1] == ["done"]
