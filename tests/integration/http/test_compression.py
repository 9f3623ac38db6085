"""Compression over real HTTP (uvicorn): negotiation, Vary, compressed requests, zip bombs."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import zstandard

from millimcp.codec.compress import compress
from tests.integration.http.conftest import body_for, headers_for


def big_call(kb: int, accept: str | None, request_id: int = 1) -> dict[str, Any]:
    headers = headers_for("tools/call", "big")
    if accept is not None:
        headers["Accept-Encoding"] = accept
    body = body_for("tools/call", {"name": "big", "arguments": {"kb": kb}}, request_id)
    return {"content": body, "headers": headers}


def raw_post(client: httpx.Client, url: str, **kwargs: Any) -> tuple[httpx.Response, bytes]:
    """The response and its body exactly as it came over the wire (not decoded)."""
    with client.stream("POST", url, **kwargs) as response:
        return response, b"".join(response.iter_raw())


def text_of(raw: bytes) -> str:
    text: str = json.loads(raw)["result"]["content"][0]["text"]
    return text


def test_responses_are_compressed_by_accept_encoding(fast_url: str) -> None:
    # httpx would add its own Accept-Encoding: a bare client sends exactly what we set.
    with httpx.Client(timeout=30, headers={"Accept-Encoding": "identity"}) as client:
        plain, plain_raw = raw_post(client, fast_url, **big_call(50, None))
        assert plain.status_code == 200
        assert "content-encoding" not in plain.headers
        assert plain.headers["vary"] == "accept-encoding"
        expected = text_of(plain_raw)
        assert len(plain_raw) > 50 * 1024

        sizes = {}
        for accept, coding, decode in (
            ("gzip", "gzip", gzip.decompress),
            ("gzip, deflate, br, zstd", "zstd", zstandard.ZstdDecompressor().decompress),
            ("zstd;q=0.1, gzip", "gzip", gzip.decompress),
        ):
            response, raw = raw_post(client, fast_url, **big_call(50, accept))
            assert response.status_code == 200
            assert response.headers["content-encoding"] == coding, accept
            assert response.headers["vary"] == "accept-encoding"
            assert int(response.headers["content-length"]) == len(raw)
            assert text_of(decode(raw)) == expected
            sizes[coding] = len(raw)
        assert sizes["zstd"] < len(plain_raw) / 5
        assert sizes["gzip"] < len(plain_raw) / 5

        # Under the 1 KiB threshold nothing is compressed, and nothing varies.
        small, small_raw = raw_post(client, fast_url, **big_call(0, "zstd, gzip"))
        assert "content-encoding" not in small.headers
        assert "vary" not in small.headers
        assert json.loads(small_raw)["result"]["content"][0]["text"] == ""


def test_httpx_reads_compressed_responses_transparently(fast_url: str) -> None:
    with httpx.Client(timeout=30) as client:  # sends gzip, deflate, br, zstd
        response = client.post(fast_url, **big_call(20, None))
        assert response.headers["content-encoding"] == "zstd"
        assert len(text_of(response.content)) >= 20 * 1024


def compressed_request(coding: str, body: bytes, name: str = "echo") -> dict[str, Any]:
    headers = {**headers_for("tools/call", name), "Content-Encoding": coding}
    return {"content": body, "headers": headers}


def test_compressed_request_bodies_are_accepted(fast_url: str) -> None:
    body = body_for("tools/call", {"name": "echo", "arguments": {"text": "packed " * 500}})
    with httpx.Client(timeout=30) as client:
        for coding in ("zstd", "gzip", "x-gzip", "identity"):
            packed = body if coding == "identity" else compress(body, coding.removeprefix("x-"))
            response = client.post(fast_url, **compressed_request(coding, packed))
            assert response.status_code == 200, response.text
            assert response.json()["result"]["content"][0]["text"] == "packed " * 500


def test_a_zip_bomb_gets_413_and_the_server_carries_on(fast_url: str) -> None:
    opening = body_for("tools/call", {"name": "echo", "arguments": {"text": "x"}})[:-2]
    padding = b" " * (64 << 20)  # valid JSON whitespace: 64 MiB once decoded
    with httpx.Client(timeout=30) as client:
        for coding in ("zstd", "gzip"):
            bomb = compress(opening + padding + b"}}", coding)
            assert len(bomb) < 4 << 20  # under the body limit on the wire
            response = client.post(fast_url, **compressed_request(coding, bomb))
            assert response.status_code == 413
            assert "once decoded" in response.json()["error"]["message"]
        body = body_for("tools/call", {"name": "echo", "arguments": {"text": "fine"}})
        response = client.post(fast_url, content=body, headers=headers_for("tools/call", "echo"))
        assert response.json()["result"]["content"][0]["text"] == "fine"


def test_unknown_and_corrupt_codings(fast_url: str) -> None:
    body = body_for("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    with httpx.Client(timeout=30) as client:
        unknown = client.post(fast_url, **compressed_request("br", body))
        assert unknown.status_code == 415
        assert unknown.headers["accept-encoding"] == "zstd, gzip, deflate"
        assert unknown.json()["error"]["code"] == -32600
        corrupt = client.post(fast_url, **compressed_request("gzip", b"\x1f\x8bnot really"))
        assert corrupt.status_code == 400
        assert "compressed body" in corrupt.json()["error"]["message"]
