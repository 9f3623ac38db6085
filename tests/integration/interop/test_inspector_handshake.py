"""Interop: the MCP Inspector CLI (2.12.0) in its legacy era, over HTTP and over stdio.

`--protocol-era legacy` makes the Inspector speak the handshake era only (`initialize`, no
`server/discover`); ad-hoc runs (a URL or a command, no catalog file) use it too when no era
is given. Both are checked on the wire: over HTTP through a TCP tap (the session id issued by
`initialize` and `MCP-Protocol-Version: 2025-11-25` on every later request), over stdio
through tests/integration/interop/stdio_tap.py. Over stdio the Inspector launches
`python examples/conformance_server.py --stdio` itself, as in the issue's example
`npx @modelcontextprotocol/inspector@2.12.0 --cli python examples/conformance_server.py
--stdio --method tools/list`. Setup: see test_inspector.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.integration.interop.peers import (
    HANDSHAKE,
    ROOT,
    TappedRequest,
    inspector_argv,
    inspector_result,
    issued_session_ids,
    run_inspector,
    tap_messages,
    tapped,
    tapped_requests,
    tcp_tap,
)

pytestmark = pytest.mark.interop


@pytest.fixture
def inspector(missing_tool: Any) -> list[str]:
    """argv prefix `node <inspector> --cli`, or skip (fail under `make test`) with the reason."""
    return inspector_argv(missing_tool)


CONFORMANCE_SERVER = [sys.executable, str(ROOT / "examples" / "conformance_server.py"), "--stdio"]
SIMPLE_TEXT = "This is a simple text response for testing."


def _legacy_http(
    inspector: list[str], tmp_path: Path, server_url: str, *args: str
) -> tuple[dict[str, Any], list[TappedRequest]]:
    """Run the Inspector in its legacy era through a TCP tap; its result and requests.

    Also checks the session: one initialize at 2025-11-25 answered with an
    `Mcp-Session-Id`, then every request in that session at that version.
    """
    with tcp_tap(server_url) as tap:
        proc = run_inspector(
            inspector,
            tmp_path,
            "--server-url",
            tap.url(urlsplit(server_url).path),
            "--transport",
            "http",
            "--protocol-era",
            "legacy",
            "--format",
            "json",
            *args,
        )
    result, requests = inspector_result(proc), tapped_requests(tap)
    _assert_handshake_session(requests, issued_session_ids(tap))
    return result, requests


def _texts(result: dict[str, Any]) -> list[str]:
    assert result.get("isError") is not True, result
    return [block["text"] for block in result["content"] if block.get("type") == "text"]


def _assert_handshake_session(requests: list[TappedRequest], issued: set[str]) -> None:
    methods = [request.message.get("method") for request in requests]
    assert methods.count("initialize") == 1, methods
    assert "server/discover" not in methods
    initialize = requests[methods.index("initialize")]
    assert initialize.message["params"]["protocolVersion"] == HANDSHAKE
    assert "mcp-session-id" not in initialize.headers
    others = [request for request in requests if request is not initialize]
    assert others, "nothing after initialize"
    assert len(issued) == 1, f"the server issued session ids {issued}"
    for request in others:
        assert request.headers.get("mcp-session-id") in issued, request
        assert request.headers.get("mcp-protocol-version") == HANDSHAKE, request


def test_legacy_http_lists_tools(inspector: list[str], tmp_path: Path, server_url: str) -> None:
    result, requests = _legacy_http(inspector, tmp_path, server_url, "--method", "tools/list")
    assert "echo" in [tool["name"] for tool in result["tools"]]
    assert "tools/list" in [request.message.get("method") for request in requests]


def test_legacy_http_calls_echo(inspector: list[str], tmp_path: Path, server_url: str) -> None:
    result, requests = _legacy_http(
        inspector,
        tmp_path,
        server_url,
        "--method",
        "tools/call",
        "--tool-name",
        "echo",
        "--tool-arg",
        "text=hi",
    )
    assert _texts(result) == ["hi"]
    calls = [r.message for r in requests if r.message.get("method") == "tools/call"]
    assert [call["params"] for call in calls] == [{"name": "echo", "arguments": {"text": "hi"}}]


def test_stdio_issue_example(inspector: list[str], tmp_path: Path) -> None:
    """The issue's command line as it stands (default era, default text output)."""
    proc = run_inspector(inspector, tmp_path, *CONFORMANCE_SERVER, "--method", "tools/list")
    assert proc.returncode == 0, f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
    # The text format pretty-prints the result object, and nothing else, on stdout.
    names = [tool["name"] for tool in json.loads(proc.stdout)["tools"]]
    assert "test_simple_text" in names


@pytest.mark.parametrize("era", [None, "legacy"], ids=["default-era", "legacy-era"])
def test_stdio_handshake_era(inspector: list[str], tmp_path: Path, era: str | None) -> None:
    """tools/list and tools/call over stdio, with the exchange recorded on the pipes."""
    era_args = [] if era is None else ["--protocol-era", era]
    logs = {method: tmp_path / f"{method.replace('/', '-')}.log" for method in ("list", "call")}

    listed = inspector_result(
        run_inspector(
            inspector,
            tmp_path,
            *tapped(CONFORMANCE_SERVER, logs["list"]),
            *era_args,
            "--format",
            "json",
            "--method",
            "tools/list",
        )
    )
    assert "test_simple_text" in [tool["name"] for tool in listed["tools"]]

    called = inspector_result(
        run_inspector(
            inspector,
            tmp_path,
            *tapped(CONFORMANCE_SERVER, logs["call"]),
            *era_args,
            "--format",
            "json",
            "--method",
            "tools/call",
            "--tool-name",
            "test_simple_text",
        )
    )
    assert _texts(called) == [SIMPLE_TEXT]

    for log in logs.values():
        sent = [message for direction, message in tap_messages(log) if direction == ">"]
        methods = [message.get("method") for message in sent]
        # The handshake era, and only it: initialize first, no server/discover probe.
        assert methods[:2] == ["initialize", "notifications/initialized"], methods
        assert "server/discover" not in methods
        answers = {
            message["id"]: message
            for direction, message in tap_messages(log)
            if direction == "<" and "id" in message
        }
        initialized = answers[sent[0]["id"]]
        assert initialized["result"]["protocolVersion"] == HANDSHAKE, initialized
        assert initialized["result"]["serverInfo"]["name"] == "millimcp-conformance"
