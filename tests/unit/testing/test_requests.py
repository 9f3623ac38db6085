"""``millimcp.testing.modern_request``: the body and headers pass the server's own checks."""

from __future__ import annotations

import httpx
import msgspec
import pytest

from millimcp import Server
from millimcp.protocol.eras import check_modern, classify_http
from millimcp.protocol.headers import McpHeaders, decode_header_value
from millimcp.protocol.methods import METHODS
from millimcp.protocol.types import META_CLIENT_CAPABILITIES
from millimcp.testing import MODERN_VERSION, modern_meta, modern_request


def decoded(body: bytes) -> dict[str, object]:
    value = msgspec.json.decode(body)
    assert isinstance(value, dict)
    return value


def test_the_body_is_a_modern_json_rpc_request() -> None:
    body, _ = modern_request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert decoded(body) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "echo",
            "arguments": {"text": "hi"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    assert MODERN_VERSION == "2026-07-28"


def test_the_headers_mirror_the_body() -> None:
    _, headers = modern_request("tools/call", {"name": "echo"})
    assert headers == {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }


PARAMS: dict[str, dict[str, object]] = {
    "tools/call": {"name": "t"},
    "resources/read": {"uri": "test://x"},
    "prompts/get": {"name": "p"},
    "completion/complete": {
        "ref": {"type": "ref/prompt", "name": "p"},
        "argument": {"name": "a", "value": ""},
    },
    "subscriptions/listen": {"notifications": {"toolsListChanged": True}},
    "tasks/get": {"taskId": "t-1"},
    "tasks/update": {"taskId": "t-1", "inputResponses": {}},
    "tasks/cancel": {"taskId": "t-1"},
}
"""The least each modern method's params need besides ``_meta``."""


@pytest.mark.parametrize(
    "method", sorted(method for method, spec in METHODS.items() if spec.era != "legacy")
)
def test_every_modern_method_passes_the_modern_checks(method: str) -> None:
    """What the HTTP front checks of a modern request holds for every request built here."""
    spec = METHODS[method]
    body, headers = modern_request(method, PARAMS.get(method), request_id="r")
    message = decoded(body)
    typed = msgspec.convert(message["params"], spec.params)
    mcp = McpHeaders(
        protocol_version=headers["mcp-protocol-version"],
        method=headers["mcp-method"],
        name=headers.get("mcp-name"),
    )
    name = getattr(typed, spec.name_field) if spec.name_field else None
    version = check_modern(method, typed.meta, name, mcp)
    assert version == MODERN_VERSION
    assert classify_http(version, mcp.protocol_version) == "modern"
    if name is None:
        assert "mcp-name" not in headers
    assert message["id"] == "r"


def test_given_meta_entries_are_added_and_win() -> None:
    given = {"progressToken": 7, "io.modelcontextprotocol/clientCapabilities": {"roots": {}}}
    params = {"name": "t", "_meta": given}
    body, _ = modern_request("tools/call", params)
    sent = decoded(body)["params"]
    assert isinstance(sent, dict)
    assert sent["_meta"] == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        "progressToken": 7,
    }
    assert params == {"name": "t", "_meta": given}  # the caller's params are left alone
    assert given == {"progressToken": 7, META_CLIENT_CAPABILITIES: {"roots": {}}}


def test_another_version_in_meta_goes_in_the_header_too() -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}
    body, headers = modern_request("server/discover", {"_meta": meta})
    assert headers["mcp-protocol-version"] == "1999-01-01"
    assert b'"io.modelcontextprotocol/protocolVersion":"1999-01-01"' in body


def test_the_name_header_defaults_to_the_target_and_can_be_given() -> None:
    assert modern_request("resources/read", {"uri": "test://a"})[1]["mcp-name"] == "test://a"
    assert modern_request("prompts/get", {"name": "p"})[1]["mcp-name"] == "p"
    assert modern_request("tools/call", {"name": "a"}, name="b")[1]["mcp-name"] == "b"
    assert modern_request("tools/call", name="only")[1]["mcp-name"] == "only"
    assert "mcp-name" not in modern_request("tools/list")[1]
    assert "mcp-name" not in modern_request("no/such/method", {"name": "x"})[1]


def test_a_name_that_is_not_plain_ascii_is_sent_base64() -> None:
    _, headers = modern_request("tools/call", {"name": "héllo wörld"})
    assert headers["mcp-name"].startswith("=?base64?")
    assert decode_header_value(headers["mcp-name"]) == "héllo wörld"


def test_big_ids_and_numbers_stay_exact() -> None:
    params = {"name": "n", "arguments": {"n": 2**70}}
    body, _ = modern_request("tools/call", params, request_id=2**65)
    assert decoded(body)["id"] == 2**65
    assert b'"n":1180591620717411303424' in body


def test_modern_meta_alone() -> None:
    assert modern_meta() == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    assert modern_meta({"progressToken": "p"})["progressToken"] == "p"


async def test_a_server_answers_it() -> None:
    server = Server("requests-test")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    body, headers = modern_request("tools/call", {"name": "echo", "arguments": {"text": "ok"}})
    transport = httpx.ASGITransport(app=server.asgi())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        response = await http.post("/mcp", content=body, headers=headers)
    assert response.status_code == 200
    reply = response.json()
    assert reply["id"] == 1
    assert reply["result"]["content"] == [{"type": "text", "text": "ok"}]
