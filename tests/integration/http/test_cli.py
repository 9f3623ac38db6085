"""``millimcp serve`` with several workers: one key seals MRTR state for all of them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import free_port, start_server, stop_server
from tests.integration.http.conftest import Rpc


@pytest.fixture(scope="module")
def two_workers() -> Iterator[str]:
    port = free_port()
    process = start_server(
        [
            "-m",
            "millimcp",
            "serve",
            "examples.conformance_server:server",
            "--port",
            str(port),
            "--workers",
            "2",
        ],
        port,
    )
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


def test_request_state_verifies_on_any_worker(two_workers: str) -> None:
    for attempt in range(12):
        # A new connection per round, so rounds land on either worker.
        with httpx.Client(timeout=30) as client:
            first = Rpc(client, two_workers).tool("test_input_required_result_elicitation")
        assert first["resultType"] == "input_required"
        answer = {"user_name": {"action": "accept", "content": {"name": f"n{attempt}"}}}
        params = {
            "name": "test_input_required_result_elicitation",
            "arguments": {},
            "inputResponses": answer,
            "requestState": first["requestState"],
        }
        with httpx.Client(timeout=30) as client:
            done = Rpc(client, two_workers).call("tools/call", params, 2)
        assert done["result"]["content"][0]["text"] == f"Hello, n{attempt}!", done
