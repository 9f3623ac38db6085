"""TLS (with session resumption) and HTTP/2 over real servers, with trustme certificates.

The tests' front (native, or ``MILLIMCP_HTTP_FRONT``: uvicorn in ``make test-fronts``): TLS
with HTTP/1.1 and session resumption. granian: TLS with HTTP/2 chosen by ALPN, and cleartext
h2c with prior knowledge; the client is httpx with the h2 package.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from millimcp.testing import ServedProcess
from tests.conftest import FRONT, ROOT, serve_python
from tests.integration.http.conftest import request_for

TARGET = "tests.servers.fastpath_server:server"


class Tls:
    def __init__(self, folder: Path) -> None:
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        self.certfile = folder / "cert.pem"
        self.keyfile = folder / "key.pem"
        self.certfile.write_bytes(b"".join(pem.bytes() for pem in cert.cert_chain_pems))
        key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
        self.keyfile.write_bytes(  # PKCS#8: granian reads no other key format
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        self.context = ssl.create_default_context()
        ca.configure_trust(self.context)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return Tls(tmp_path_factory.mktemp("tls"))


def serve(*options: str) -> AbstractContextManager[ServedProcess]:
    return serve_python(["-m", "millimcp", "serve", TARGET, "--port", "{port}", *options])


@pytest.fixture(scope="module")
def front_tls(tls: Tls) -> Iterator[int]:
    files = ["--certfile", str(tls.certfile), "--keyfile", str(tls.keyfile)]
    with serve("--http", FRONT, *files) as served:
        yield served.port


@pytest.fixture(scope="module")
def granian_tls(tls: Tls) -> Iterator[int]:
    with serve(
        "--http", "granian", "--certfile", str(tls.certfile), "--keyfile", str(tls.keyfile)
    ) as served:
        yield served.port


@pytest.fixture(scope="module")
def granian_plain() -> Iterator[int]:
    with serve("--http", "granian") as served:
        yield served.port


def echo(text: str, request_id: int = 1) -> tuple[bytes, dict[str, str]]:
    return request_for("tools/call", {"name": "echo", "arguments": {"text": text}}, request_id)


async def post_echo(
    client: httpx.AsyncClient, url: str, text: str, request_id: int = 1
) -> httpx.Response:
    body, headers = echo(text, request_id)
    return await client.post(url, content=body, headers=headers)


async def twenty_calls(client: httpx.AsyncClient, url: str) -> set[str]:
    """20 concurrent calls; the HTTP versions they went over."""
    responses = await asyncio.gather(*(post_echo(client, url, f"n{n}", n) for n in range(20)))
    for n, response in enumerate(responses):
        assert response.status_code == 200
        assert response.json()["result"]["content"][0]["text"] == f"n{n}"
    return {response.http_version for response in responses}


def resumed(port: int, context: ssl.SSLContext) -> tuple[str | None, bool]:
    """Connect, make a call, reconnect with the session: (TLS version, was it resumed)."""

    def connect(session: ssl.SSLSession | None) -> ssl.SSLSocket:
        sock = context.wrap_socket(
            socket.create_connection(("127.0.0.1", port), timeout=10),
            server_hostname="127.0.0.1",
            session=session,
        )
        body, fields = echo("resume")
        headers = "".join(f"{k}: {v}\r\n" for k, v in fields.items())
        sock.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")  # TLS 1.3 tickets arrive by now
        return sock

    first = connect(None)
    session, version = first.session, first.version()
    first.close()
    second = connect(session)
    reused = bool(second.session_reused)
    second.close()
    return version, reused


async def test_the_front_serves_tls_with_http1(front_tls: int, tls: Tls) -> None:
    url = f"https://127.0.0.1:{front_tls}/mcp"
    async with httpx.AsyncClient(verify=tls.context, http2=True, timeout=30) as client:
        assert await twenty_calls(client, url) == {"HTTP/1.1"}  # no h2 in uvicorn: ALPN falls back
    with pytest.raises(httpx.ConnectError):  # an untrusted client refuses the certificate
        async with httpx.AsyncClient(timeout=30) as client:
            await post_echo(client, url, "x")


def test_the_front_resumes_tls_sessions(front_tls: int, tls: Tls) -> None:
    version, reused = resumed(front_tls, tls.context)
    assert version == "TLSv1.3"
    assert reused


async def test_granian_serves_http2_over_tls(granian_tls: int, tls: Tls) -> None:
    url = f"https://127.0.0.1:{granian_tls}/mcp"
    limits = httpx.Limits(max_connections=1)  # 20 calls in flight on one connection
    async with httpx.AsyncClient(
        verify=tls.context, http2=True, limits=limits, timeout=30
    ) as client:
        assert await twenty_calls(client, url) == {"HTTP/2"}
    async with httpx.AsyncClient(verify=tls.context, timeout=30) as client:
        assert await twenty_calls(client, url) == {"HTTP/1.1"}  # ALPN: a client without h2


def test_granian_resumes_tls_sessions(granian_tls: int, tls: Tls) -> None:
    version, reused = resumed(granian_tls, tls.context)
    assert version == "TLSv1.3"
    assert reused


async def test_granian_serves_h2c_with_prior_knowledge(granian_plain: int) -> None:
    url = f"http://127.0.0.1:{granian_plain}/mcp"
    async with httpx.AsyncClient(http1=False, http2=True, timeout=30) as client:
        assert await twenty_calls(client, url) == {"HTTP/2"}
    async with httpx.AsyncClient(timeout=30) as client:
        assert await twenty_calls(client, url) == {"HTTP/1.1"}


def test_certfile_and_keyfile_go_together(tls: Tls) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "millimcp", "serve", TARGET, "--certfile", str(tls.certfile)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "--certfile and --keyfile go together" in proc.stderr


@pytest.fixture(scope="module")
def native_tls(tls: Tls) -> Iterator[int]:
    with serve(
        "--http", "native", "--certfile", str(tls.certfile), "--keyfile", str(tls.keyfile)
    ) as served:
        yield served.port


async def test_native_serves_tls_with_http1(native_tls: int, tls: Tls) -> None:
    url = f"https://127.0.0.1:{native_tls}/mcp"
    async with httpx.AsyncClient(verify=tls.context, http2=True, timeout=30) as client:
        assert await twenty_calls(client, url) == {"HTTP/1.1"}  # ALPN offers http/1.1 only
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient(timeout=30) as client:
            await post_echo(client, url, "x")


def test_native_resumes_tls_sessions(native_tls: int, tls: Tls) -> None:
    version, reused = resumed(native_tls, tls.context)
    assert version == "TLSv1.3"
    assert reused
