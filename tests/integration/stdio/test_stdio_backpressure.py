"""Backpressure over stdio: refusals come at once, and control messages (ping,
notifications/cancelled) never wait behind queued work (SEEDS S1.5)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from millimcp.testing import modern_meta

ROOT = Path(__file__).resolve().parents[3]
META = modern_meta()


def gated(request_id: int, tag: str) -> dict[str, Any]:
    params = {"name": "gated", "arguments": {"tag": tag, "n": request_id}, "_meta": META}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def test_refusals_and_control_messages_do_not_wait_behind_queued_work() -> None:
    command = ["-m", "millimcp", "serve", "tests.servers.fastpath_server:server", "--stdio"]
    process = subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    lines: queue.Queue[bytes] = queue.Queue()
    stdout = process.stdout

    def read() -> None:
        for line in stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()

    def recv() -> dict[str, Any]:
        return dict(json.loads(lines.get(timeout=30)))

    try:
        for request_id in range(1, 31):  # 10 run, 20 wait (the tool's limit)
            send(gated(request_id, "stdio"))
        send(gated(31, "stdio"))
        refused = recv()  # the only answer while the 30 are held at the gate
        assert refused["id"] == 31
        assert refused["error"]["code"] == -32050
        assert refused["error"]["data"] == {"retryAfterMs": 2000}

        send({"jsonrpc": "2.0", "id": 32, "method": "ping", "params": {"_meta": META}})
        assert recv() == {"jsonrpc": "2.0", "id": 32, "result": {}}
        cancel = {"requestId": 25, "reason": "no longer needed"}  # one of the queued calls
        send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})

        opened = {"name": "open_gate", "arguments": {"tag": "stdio"}, "_meta": META}
        send({"jsonrpc": "2.0", "id": 33, "method": "tools/call", "params": opened})
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < 30:  # 1..30 but 25, and the open_gate call
            message = recv()
            answers[message["id"]] = message
        assert set(answers) == set(range(1, 34)) - {25, 31, 32}
        for request_id in set(range(1, 31)) - {25}:
            text = answers[request_id]["result"]["content"][0]["text"]
            assert text == f"stdio {request_id}"
        assert lines.empty()  # the cancelled request got no answer
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            reader.join(timeout=10)
            stdout.close()
