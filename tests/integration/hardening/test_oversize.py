"""Bodies over the limit: every client reads the 413, and the server goes on serving.

A client that sends all of its body before it reads (``urllib``, which also sends
``Connection: close``) only reads the answer if the server reads the rest of the body
before it closes (the linger of :mod:`millimcp.transports.body`); without it the client
gets a connection reset.
"""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.integration.hardening.conftest import LIMIT, Front

MB = 1024 * 1024
OVER = (5 * MB, 8 * MB, 20 * MB)
"""How far over the limit the bodies go."""
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def assert_refused(status: int, body: bytes, expected: int = 413) -> None:
    assert status == expected, body[:200]
    assert json.loads(body)["error"]["code"] == -32600


@pytest.mark.parametrize("over", OVER)
def test_urllib_reads_the_413(front: Front, over: int) -> None:
    request = urllib.request.Request(
        front.url, data=b"x" * (LIMIT + over), headers=JSON, method="POST"
    )
    assert request.get_header("Connection") is None  # urllib adds Connection: close itself
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    with refused.value:
        assert_refused(refused.value.code, refused.value.read())
    front.works()


@pytest.mark.parametrize("over", OVER)
@pytest.mark.parametrize("close", [True, False], ids=["close", "keep-alive"])
def test_http_client_reads_the_413(front: Front, over: int, close: bool) -> None:
    """http.client, with and without ``Connection: close``; on a kept-alive connection the
    next request goes over the same connection."""
    connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=30)
    headers = {**JSON, "connection": "close"} if close else JSON
    connection.request("POST", "/mcp", body=b"x" * (LIMIT + over), headers=headers)
    response = connection.getresponse()
    assert_refused(response.status, response.read())
    if not close:
        connection.request("POST", "/mcp", body=b"{}", headers=JSON)
        with connection.getresponse() as again:
            assert again.status == 400  # answered on the same connection
            again.read()
    connection.close()
    front.works()


@pytest.mark.parametrize("over", OVER)
@pytest.mark.parametrize("close", [True, False], ids=["close", "keep-alive"])
async def test_aiohttp_reads_the_413(front: Front, over: int, close: bool) -> None:
    connector = aiohttp.TCPConnector(force_close=close)
    async with aiohttp.ClientSession(connector=connector) as session:
        body = io.BytesIO(b"x" * (LIMIT + over))
        async with session.post(front.url, data=body, headers=JSON) as response:
            assert_refused(response.status, await response.read())
        async with session.post(front.url, data=b"{}", headers=JSON) as response:
            assert response.status == 400  # the server answers the next request
    await settle_transports()
    await asyncio.to_thread(lambda: front.works())


async def test_aiohttp_chunked_body_over_the_limit(front: Front) -> None:
    """No Content-Length: the server finds out while reading, then drains the rest."""

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range((LIMIT + 5 * MB) // (256 * 1024)):
            yield b"x" * (256 * 1024)

    async with (
        aiohttp.ClientSession() as session,
        session.post(front.url, data=chunks(), headers=JSON) as response,
    ):
        assert response.request_info.headers.get("Transfer-Encoding") == "chunked"
        assert_refused(response.status, await response.read())
    await settle_transports()


async def settle_transports() -> None:
    """Let aiohttp's closing transports finish closing before the test's loop ends (else
    one collected later warns ``unclosed transport``, in whichever test runs then)."""
    await asyncio.sleep(0.05)


CURL_CASES = [
    *[(over, [], "expect-100") for over in OVER],
    *[(over, ["-H", "Expect:", "-H", "Connection: close"], "no-expect-close") for over in OVER],
    (20 * MB, ["-H", "Expect:"], "no-expect"),
    (20 * MB, ["-H", "Connection: close"], "close"),
]


@pytest.mark.parametrize(
    ("over", "extra"),
    [case[:2] for case in CURL_CASES],
    ids=[f"{case[2]}-{case[0] // MB}MB" for case in CURL_CASES],
)
def test_curl_reads_the_413(front: Front, over: int, extra: list[str], tmp_path: Path) -> None:
    """curl sends ``Expect: 100-continue`` for big bodies unless told not to."""
    body = tmp_path / "body"
    body.write_bytes(b"x" * (LIMIT + over))
    out = tmp_path / "out"
    command = [
        "curl", "-sS", "-o", str(out), "-w", "%{http_code}", "--max-time", "30",
        "-H", "Content-Type: application/json", *extra, "--data-binary", f"@{body}", front.url,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert_refused(int(done.stdout), out.read_bytes())
    front.works()


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"content-type": "text/plain"}, 415),
        ({**JSON, "origin": "http://evil.example"}, 403),
    ],
    ids=["415", "403"],
)
def test_other_early_refusals_are_read_too(
    front: Front, headers: dict[str, str], status: int
) -> None:
    request = urllib.request.Request(
        front.url, data=b"x" * (5 * MB), headers=headers, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    with refused.value:
        assert_refused(refused.value.code, refused.value.read(), status)
    front.works()
