"""millimcp.lab.target: the TARGET syntax, and the request captured from the real Client."""

from __future__ import annotations

import argparse
import socket

import msgspec
import pytest

from millimcp.errors import ConfigurationError
from millimcp.lab.target import (
    Target,
    add_target_arguments,
    connect,
    parse_target,
    target_from_args,
)


def parsed(*argv: str, command: tuple[str, ...] = ()) -> Target:
    parser = argparse.ArgumentParser()
    add_target_arguments(parser)
    args = parser.parse_args(argv)
    args.command_argv = list(command)
    return target_from_args(args)


def test_an_http_url_is_an_http_target() -> None:
    target = parsed("http://127.0.0.1:8000/mcp", "-H", "Authorization: Bearer x", "-H", "X-A:1")
    assert target.kind == "http"
    assert target.url == "http://127.0.0.1:8000/mcp"
    assert dict(target.headers) == {"Authorization": "Bearer x", "X-A": "1"}
    assert str(target) == "http://127.0.0.1:8000/mcp"


def test_a_quoted_command_is_split_like_a_shell() -> None:
    target = parse_target("python 'my server.py' --stdio")
    assert target.kind == "stdio"
    assert target.command == ("python", "my server.py", "--stdio")
    assert str(target) == "python 'my server.py' --stdio"


def test_the_command_after_double_dash_is_taken_verbatim() -> None:
    target = parsed(command=("node", "server.js", "--port", "3"))
    assert target.kind == "stdio"
    assert target.command == ("node", "server.js", "--port", "3")


@pytest.mark.parametrize(
    ("text", "command", "message"),
    [
        (None, (), "no TARGET"),
        ("  ", (), "no TARGET"),
        ("python s.py", ("python", "s.py"), "not both"),
        ("http:///mcp", (), "no host"),
        ("ws://127.0.0.1/mcp", (), "only http"),
    ],
)
def test_bad_targets_are_refused_with_a_reason(
    text: str | None, command: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_target(text, command)


@pytest.mark.parametrize("header", ["no-colon", ": empty", "X-A: 1\r\nX-B: 2"])
def test_malformed_headers_are_refused(header: str) -> None:
    with pytest.raises(ConfigurationError, match="Name: value"):
        parsed("http://127.0.0.1/mcp", "-H", header)


def roundtrip(host: str, port: int, raw: bytes) -> bytes:
    """Send a raw request on a fresh socket; the whole response (the server closes it)."""
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(raw.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1))
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("era", ["modern", "handshake"])
async def test_the_captured_request_replays_with_a_new_id(server_url: str, era: str) -> None:
    target = parse_target(server_url, headers={"X-Lab": "yes"})
    async with connect(target, era=era) as connection:  # type: ignore[arg-type]
        assert connection.era == era
        assert connection.transport == "http"
        assert connection.server == "basic-test-server/1.2.3"
        assert (connection.session_id is not None) == (era == "handshake")
        result, template = await connection.call_template("echo", {"text": "hi"})
        assert result.text == "hi"
        headers = dict(template.headers)
        assert headers["X-Lab"] == "yes"
        assert headers.get("Mcp-Session-Id") == connection.session_id
        body = msgspec.json.decode(template.body(123456789))
        assert body["id"] == 123456789
        assert body["params"]["arguments"] == {"text": "hi"}
        assert "traceparent" not in body["params"].get("_meta", {})
        reply = roundtrip(template.host, template.port, template.raw_request(987654321))
    assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
    assert b'"id":987654321' in reply
    assert b'"text":"hi"' in reply


async def test_a_template_needs_http() -> None:
    target = Target("stdio", command=("true",))
    from millimcp.lab.target import Connection

    connection = Connection(target, client=None, link=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="only for HTTP"):
        await connection.call_template("echo", {})
