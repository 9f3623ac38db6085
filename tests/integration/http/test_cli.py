"""``millimcp serve`` with several workers: one key seals MRTR state for all of them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import serve_python
from tests.integration.http.conftest import Rpc

TOOL = "test_input_required_result_elicitation"
MIN_ROUNDS = 12
MAX_ROUNDS = 200


@pytest.fixture(scope="module")
def two_workers(front: str) -> Iterator[str]:
    target = "tests.servers.conformance_workers_server:server"
    command = ["-m", "millimcp", "serve", target, "--port", "{port}", "--workers", "2"]
    command += ["--http", front]
    with serve_python(command) as served:
        yield served.url()


def on_a_new_connection(
    url: str, method: str, params: dict[str, Any], request_id: int = 1
) -> tuple[str, dict[str, Any]]:
    """(the pid of the worker that took a new connection, the reply to the call made on it)."""
    with httpx.Client(timeout=30) as client:
        rpc = Rpc(client, url)
        pid = rpc.tool("whoami")["content"][0]["text"]
        reply = rpc.call(method, params, request_id)  # the same kept-alive connection
        assert rpc.tool("whoami")["content"][0]["text"] == pid
    return str(pid), reply


def test_request_state_verifies_on_any_worker(two_workers: str) -> None:
    """Each round asks on one connection and answers on another: rounds go on until the
    state sealed by one worker has been verified by the other, both ways."""
    crossings: set[tuple[str, str]] = set()
    attempt = 0
    while attempt < MIN_ROUNDS or len(crossings) < 2:
        assert attempt < MAX_ROUNDS, f"the workers never swapped a round: {crossings}"
        asked_on, first = on_a_new_connection(
            two_workers, "tools/call", {"name": TOOL, "arguments": {}}
        )
        result = first["result"]
        assert result["resultType"] == "input_required"
        answer = {"user_name": {"action": "accept", "content": {"name": f"n{attempt}"}}}
        params = {
            "name": TOOL,
            "arguments": {},
            "inputResponses": answer,
            "requestState": result["requestState"],
        }
        answered_on, done = on_a_new_connection(two_workers, "tools/call", params, 2)
        assert done["result"]["content"][0]["text"] == f"Hello, n{attempt}!", done
        if asked_on != answered_on:
            crossings.add((asked_on, answered_on))
        attempt += 1
    assert len({pid for pair in crossings for pid in pair}) == 2
