"""Bad input gets the spec's error and status, and the server answers the next request."""

from __future__ import annotations

import json

import pytest

from millimcp.protocol.types import META_PROTOCOL_VERSION
from millimcp.testing import modern_meta
from tests.integration.http.conftest import CLIENT_META, Rpc, body_for, headers_for, request_for


def _error(response_json: dict[str, object]) -> int:
    error = response_json["error"]
    assert isinstance(error, dict)
    return int(error["code"])


def with_argument(raw: bytes) -> bytes:
    """An ``echo`` call whose arguments carry ``raw`` (bytes that are not valid JSON)."""
    body = body_for("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    assert body.count(b'"text":"x"') == 1
    return body.replace(b'"text":"x"', b'"text":"x",' + raw)


def test_malformed_json(rpc: Rpc) -> None:
    response = rpc.post(b'{"jsonrpc": "2.0", "id": 1, "method": ', headers_for("tools/list"))
    assert response.status_code == 400
    assert _error(response.json()) == -32700
    rpc.works()


def test_invalid_utf8(rpc: Rpc) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"\xff\xfe"}}'
    response = rpc.post(body, headers_for("tools/list"))
    assert response.status_code == 400
    assert _error(response.json()) == -32700
    rpc.works()


@pytest.mark.parametrize(
    "body",
    [
        b"[" + body_for("tools/list") + b"]",  # a batch
        b'{"id": 7, "method": "tools/list", "params": {}}',  # no jsonrpc
        b'{"jsonrpc": "1.0", "id": 7, "method": "tools/list"}',  # wrong version
        b'{"jsonrpc": "2.0", "id": 7, "params": {}, "method": 5}',  # method not a string
        b'"just a string"',
    ],
    ids=["batch", "no-jsonrpc", "jsonrpc-1.0", "method-not-string", "scalar"],
)
def test_invalid_request(rpc: Rpc, body: bytes) -> None:
    response = rpc.post(body, headers_for("tools/list"))
    assert response.status_code == 400
    reply = response.json()
    assert _error(reply) == -32600
    if b'"id": 7' in body:
        assert reply["id"] == 7  # the id is echoed when it can be read
    rpc.works()


def test_unknown_method(rpc: Rpc) -> None:
    response = rpc.post(body_for("tools/frobnicate"), headers_for("tools/frobnicate"))
    assert response.status_code == 404
    assert _error(response.json()) == -32601
    rpc.works()


@pytest.mark.parametrize(
    "params",
    [{"name": 5}, {"name": "echo", "arguments": [1, 2]}],
    ids=["name-not-string", "arguments-not-object"],
)
def test_wrong_params(rpc: Rpc, params: dict[str, object]) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {**params, "_meta": modern_meta(CLIENT_META)},
        }
    )
    response = rpc.post(body, headers_for("tools/call", "echo"))
    reply = response.json()
    if "error" in reply:
        assert response.status_code == 400
        assert _error(reply) in (-32602, -32020)
    else:  # arguments of the wrong shape are a tool error the model can read
        assert reply["result"]["isError"] is True
    rpc.works()


def test_unknown_tool_is_invalid_params(rpc: Rpc) -> None:
    reply = rpc.call("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert _error(reply) == -32602
    rpc.works()


def test_invalid_arguments_are_a_tool_error(rpc: Rpc) -> None:
    result = rpc.tool("echo", {"text": 42})
    assert result["isError"] is True
    assert "Expected `str`" in result["content"][0]["text"]
    assert rpc.tool("echo", {})["isError"] is True  # a required argument missing
    rpc.works()


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (headers_for("tools/list"), -32020),  # Mcp-Method says tools/list, body tools/call
        ({**headers_for("tools/call"), "mcp-name": "other"}, -32020),
        (
            {
                k: v
                for k, v in headers_for("tools/call", "echo").items()
                if k != "mcp-protocol-version"
            },
            -32020,
        ),
        ({**headers_for("tools/call", "echo"), "mcp-protocol-version": "2025-06-18"}, -32020),
    ],
    ids=["method", "name", "version-missing", "version-differs"],
)
def test_header_body_mismatch(rpc: Rpc, headers: dict[str, str], expected: int) -> None:
    body = body_for("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    response = rpc.post(body, headers)
    assert response.status_code == 400
    assert _error(response.json()) == expected
    rpc.works()


def test_missing_meta_is_invalid_params(rpc: Rpc) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}})
    response = rpc.post(body, headers_for("tools/list"))
    assert response.status_code == 400
    reply = response.json()
    assert (_error(reply), reply["id"]) == (-32602, 9)


def test_unsupported_version(rpc: Rpc) -> None:
    body, headers = request_for(
        "server/discover", {"_meta": {META_PROTOCOL_VERSION: "1999-01-01"}}, request_id=4
    )
    assert headers["mcp-protocol-version"] == "1999-01-01"
    response = rpc.post(body, headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "1999-01-01"}


def test_body_over_the_limit(rpc: Rpc) -> None:
    text = "x" * (5 * 1024 * 1024)
    body = body_for("tools/call", {"name": "echo", "arguments": {"text": text}})
    response = rpc.post(body, headers_for("tools/call", "echo"))
    assert response.status_code == 413
    rpc.works()


def test_integer_beyond_64_bits_round_trips(rpc: Rpc) -> None:
    value = 2**70
    body = body_for("tools/call", {"name": "echo_int", "arguments": {"value": value}})
    response = rpc.post(body, headers_for("tools/call", "echo_int"))
    assert b"1180591620717411303424" in response.content
    assert response.json()["result"]["structuredContent"] == {"result": value}


def test_deep_nesting_is_refused_cleanly(rpc: Rpc) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    body = with_argument(b'"deep":' + deep.encode())
    response = rpc.post(body, headers_for("tools/call", "echo"))
    assert response.status_code == 400
    reply = response.json()
    assert _error(reply) == -32700
    assert "nested" in reply["error"]["message"]
    rpc.works()


def test_nan_and_infinity_are_rejected(rpc: Rpc) -> None:
    # Not JSON at all, so refused wherever they stand. (A finite-looking literal that
    # overflows, like 1e400, is refused when a field is decoded as a number; see the codec
    # unit tests. In a field nobody reads it is skipped, never turned into a float.)
    for literal in ("NaN", "Infinity", "-Infinity"):
        body = with_argument(b'"n":' + literal.encode())
        response = rpc.post(body, headers_for("tools/call", "echo"))
        assert response.status_code == 400, literal
        assert _error(response.json()) in (-32700, -32602), literal
    rpc.works()


def test_notification_is_accepted(rpc: Rpc) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    )
    response = rpc.post(body, headers_for("notifications/cancelled"))
    assert response.status_code == 202
    assert response.content == b""


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_other_http_methods(rpc: Rpc, method: str) -> None:
    response = rpc.client.request(method, rpc.url)
    assert response.status_code == 405
    rpc.works()


def test_wrong_content_type(rpc: Rpc) -> None:
    headers = {**headers_for("tools/list"), "content-type": "text/plain"}
    assert rpc.post(body_for("tools/list"), headers).status_code == 415


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://evil.example.com"}, {"Host": "evil.example.com"}, {"Origin": "null"}],
)
def test_dns_rebinding_is_refused(rpc: Rpc, headers: dict[str, str]) -> None:
    response = rpc.post(body_for("tools/list"), {**headers_for("tools/list"), **headers})
    assert response.status_code == 403
    rpc.works()


def test_loopback_origin_is_accepted(rpc: Rpc) -> None:
    port = rpc.url.split(":")[2].split("/")[0]
    headers = {**headers_for("tools/list"), "Origin": f"http://localhost:{port}"}
    assert rpc.post(body_for("tools/list"), headers).status_code == 200


def test_a_peer_that_vanishes_mid_body(server_url: str) -> None:
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(server_url)
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"jsonrpc":'
        )
    import httpx

    with httpx.Client() as client:
        Rpc(client, server_url).works()
