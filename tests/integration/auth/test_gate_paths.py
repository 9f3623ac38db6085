"""The auth rules on the wire, on the tests' front (native by default, uvicorn in ``make
test-fronts``): refusals on a kept-alive connection, in order with pipelined requests; refusals
to a client that closes (urllib); the scopes of a body the rules must read (chunked, handshake
era) or cannot read (compressed: every scope any operation declares)."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import urllib.error
import urllib.request
from typing import Any

from millimcp.auth import Principal, StaticTokens, parse_bearer
from millimcp.testing import modern_request
from tests.integration.auth.test_resource_server import protected_server

READER = Principal("reader", scopes=frozenset({"orders:read"}))
WRITER = Principal("writer", scopes=frozenset({"orders:read", "orders:write"}))
TOKENS = StaticTokens({"reader-token": READER, "writer-token": WRITER})


def _request(method: str, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body or method == "POST":
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _read_responses(sock: socket.socket, count: int) -> list[tuple[int, dict[str, str], bytes]]:
    """``count`` responses, read in order (a body by Content-Length, or chunked)."""
    buffer = bytearray()

    def until(marker: bytes) -> bytes:
        while marker not in buffer:
            more = sock.recv(65536)
            assert more, "the connection closed early"
            buffer.extend(more)
        found = buffer.index(marker)
        taken = bytes(buffer[:found])
        del buffer[: found + len(marker)]
        return taken

    def exactly(size: int) -> bytes:
        while len(buffer) < size:
            more = sock.recv(65536)
            assert more, "the connection closed inside a body"
            buffer.extend(more)
        taken = bytes(buffer[:size])
        del buffer[:size]
        return taken

    answers: list[tuple[int, dict[str, str], bytes]] = []
    while len(answers) < count:
        status_line, *fields = until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        headers = {}
        for field in fields:
            name, _, value = field.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while size := int(until(b"\r\n"), 16):
                body += exactly(size)
                until(b"\r\n")
            until(b"\r\n")
        else:
            body = exactly(int(headers.get("content-length", "0")))
        answers.append((int(status_line.split()[1]), headers, body))
    return answers


def _pipelined(port: int, requests: list[bytes]) -> list[tuple[int, dict[str, str], bytes]]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"".join(requests))
        return _read_responses(sock, len(requests))


async def test_refusals_keep_a_pipelined_connection_and_its_order(serve: Any) -> None:
    url = await serve(protected_server(TOKENS).asgi())
    port = int(url.rsplit(":", 1)[1])
    body, headers = modern_request("tools/call", {"name": "whoami", "arguments": {}})
    scoped, scoped_headers = modern_request(
        "tools/call", {"name": "create_order", "arguments": {"item": "x"}}
    )
    answers = await asyncio.to_thread(
        _pipelined,
        port,
        [
            _request("GET", "/.well-known/oauth-protected-resource/mcp", {}),
            _request("POST", "/mcp", headers, body),  # no token
            _request("POST", "/mcp", {**headers, "authorization": "Bearer nope"}, body),
            _request(
                "POST", "/mcp", {**scoped_headers, "authorization": "Bearer reader-token"}, scoped
            ),
            _request("POST", "/mcp", {**headers, "authorization": "Bearer reader-token"}, body),
        ],
    )
    statuses = [status for status, _, _ in answers]
    assert statuses == [200, 401, 401, 403, 200]
    assert json.loads(answers[0][2])["resource"] == "http://127.0.0.1/mcp"
    assert parse_bearer(answers[1][1]["www-authenticate"]).error is None  # type: ignore[union-attr]
    assert parse_bearer(answers[2][1]["www-authenticate"]).error == "invalid_token"  # type: ignore[union-attr]
    refused = parse_bearer(answers[3][1]["www-authenticate"])
    assert refused is not None
    assert refused.error == "insufficient_scope"
    assert refused.scope == "orders:read orders:write"
    assert json.loads(answers[4][2])["result"]["content"][0]["text"] == "reader None orders:read"


def _urlopen(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


async def test_refusals_reach_a_client_that_closes(serve: Any) -> None:
    url = await serve(protected_server(TOKENS).asgi()) + "/mcp"
    body, headers = modern_request(
        "tools/call", {"name": "create_order", "arguments": {"item": "x"}}
    )
    status, answer, payload = await asyncio.to_thread(_urlopen, url, body, headers)
    assert status == 401
    assert "resource_metadata=" in answer["www-authenticate"]
    assert json.loads(payload)["error"] == "invalid_request"
    reader = {**headers, "authorization": "Bearer reader-token"}
    status, answer, payload = await asyncio.to_thread(_urlopen, url, body, reader)
    assert status == 403
    assert json.loads(payload)["error"] == "insufficient_scope"
    writer = {**headers, "authorization": "Bearer writer-token"}
    status, _, payload = await asyncio.to_thread(_urlopen, url, body, writer)
    assert status == 200
    assert json.loads(payload)["result"]["content"][0]["text"] == "created x"


HANDSHAKE = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
}


def _chunked_post(port: int, body: bytes, token: str) -> tuple[int, dict[str, str], bytes]:
    """A handshake-era POST whose body comes in small chunks (the rules read it whole)."""
    lines = ["POST /mcp HTTP/1.1", "host: 127.0.0.1", "transfer-encoding: chunked"]
    lines += [f"{name}: {value}" for name, value in HANDSHAKE.items()]
    lines.append(f"authorization: Bearer {token}")
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + 7]), body[i : i + 7]) for i in range(0, len(body), 7)
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + chunks + b"0\r\n\r\n")
        return _read_responses(sock, 1)[0]


async def test_a_chunked_handshake_body_names_the_operation(serve: Any) -> None:
    url = await serve(protected_server(TOKENS).asgi())
    port = int(url.rsplit(":", 1)[1])
    call = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "create_order", "arguments": {"item": "x"}},
        }
    ).encode()
    status, headers, _ = await asyncio.to_thread(_chunked_post, port, call, "reader-token")
    assert status == 403
    assert parse_bearer(headers["www-authenticate"]).scope == "orders:read orders:write"  # type: ignore[union-attr]
    listing = b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}'
    status, _, _ = await asyncio.to_thread(_chunked_post, port, listing, "reader-token")
    assert status != 403  # the endpoint's own answer (no session yet): not the rules'
    status, _, _ = await asyncio.to_thread(_chunked_post, port, call, "writer-token")
    assert status != 403


async def test_a_compressed_body_needs_every_scope(serve: Any) -> None:
    """The rules cannot read the operation from a compressed handshake body, so it may be any
    operation: a harmless one still needs the scopes of the most guarded."""
    url = await serve(protected_server(TOKENS).asgi()) + "/mcp"
    listing = gzip.compress(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}')
    headers = {**HANDSHAKE, "content-encoding": "gzip"}
    reader = {**headers, "authorization": "Bearer reader-token"}
    status, answer, _ = await asyncio.to_thread(_urlopen, url, listing, reader)
    assert status == 403
    assert parse_bearer(answer["www-authenticate"]).scope == "orders:read orders:write"  # type: ignore[union-attr]
    writer = {**headers, "authorization": "Bearer writer-token"}
    status, _, _ = await asyncio.to_thread(_urlopen, url, listing, writer)
    assert status != 403


async def test_a_framed_body_needs_every_scope(serve: Any) -> None:
    """A body with a binary attachment is not read for its operation either."""
    from millimcp.codec import ATTACHMENT_MEDIA_TYPE
    from millimcp.codec.attachment import frame

    url = await serve(protected_server(TOKENS).asgi()) + "/mcp"
    listing = b"".join(frame(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}', [b"\0" * 8]))
    headers = {**HANDSHAKE, "content-type": ATTACHMENT_MEDIA_TYPE}
    status, answer, _ = await asyncio.to_thread(
        _urlopen, url, listing, {**headers, "authorization": "Bearer reader-token"}
    )
    assert status == 403
    assert parse_bearer(answer["www-authenticate"]).scope == "orders:read orders:write"  # type: ignore[union-attr]


async def test_other_paths_and_methods_of_a_protected_server(serve: Any) -> None:
    """The metadata document answers GET, HEAD and OPTIONS only; a path that is not MCP (the
    health check a load balancer probes) needs no token."""
    from millimcp import Server
    from millimcp.auth import ProtectedResource
    from millimcp.transports.http import HttpConfig

    server = Server(
        "probed",
        auth=ProtectedResource(
            resource="http://127.0.0.1/mcp",
            authorization_servers=["http://127.0.0.1/as"],
            verifier=TOKENS,
        ),
    )
    url = await serve(server.asgi(http=HttpConfig(health_path="/healthz")))
    port = int(url.rsplit(":", 1)[1])
    metadata = "/.well-known/oauth-protected-resource/mcp"
    answers = await asyncio.to_thread(
        _pipelined,
        port,
        [
            _request("POST", metadata, {"content-type": "application/json"}),
            _request("HEAD", metadata, {}),
            _request("GET", "/healthz", {}),
        ],
    )
    assert [status for status, _, _ in answers] == [405, 200, 200]
    assert answers[0][1]["allow"] == "GET, OPTIONS"
    assert answers[1][2] == b""
