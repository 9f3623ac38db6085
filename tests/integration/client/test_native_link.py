"""What only the native link has, or has its own way: TLS through the loop's ``ssl`` with
session resumption, the pool's cap from ``Limits``, header hygiene, long SSE replies, URLs."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from millimcp import Client, Limits, Retry
from millimcp.client.native import NativeLink
from millimcp.errors import NotSent
from tests.conftest import serve_python

SERVER = "tests.servers.client_core_server:server"


@pytest.fixture(scope="module")
def tls_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ssl.SSLContext]]:
    """The client-core server over TLS (uvicorn), and a context that trusts its private CA."""
    folder: Path = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    certfile, keyfile = folder / "cert.pem", folder / "key.pem"
    certfile.write_bytes(b"".join(pem.bytes() for pem in cert.cert_chain_pems))
    keyfile.write_bytes(cert.private_key_pem.bytes())
    context = ssl.create_default_context()
    ca.configure_trust(context)
    argv = ["-m", "millimcp", "serve", SERVER, "--port", "{port}"]
    with serve_python([*argv, "--certfile", str(certfile), "--keyfile", str(keyfile)]) as served:
        yield f"https://127.0.0.1:{served.port}/mcp", context


def native(client: Client) -> NativeLink:
    link = client._core.link
    assert isinstance(link, NativeLink)
    return link


async def test_tls_resumes_the_session_on_new_connections(
    tls_served: tuple[str, ssl.SSLContext],
) -> None:
    url, context = tls_served
    no_keepalive = Limits(max_keepalive=0)  # a new connection (and handshake) per call
    async with Client.over_http(url, ssl=context, limits=no_keepalive, http="native") as client:
        for i in range(4):
            assert (await client.call_tool("echo", {"text": f"t{i}"})).text == f"t{i}"
        link = native(client)
        assert link.connections_opened >= 4
        assert link.tls_resumed >= 1  # later handshakes resumed the first one's session


async def test_tls_verifies_by_default_and_false_skips_it(
    tls_served: tuple[str, ssl.SSLContext],
) -> None:
    url, _ = tls_served
    with pytest.raises(NotSent):  # the private CA is not trusted by default
        async with Client.over_http(url, retry=Retry(attempts=0), http="native"):
            pass
    async with Client.over_http(url, ssl=False, http="native") as client:
        assert (await client.call_tool("echo", {"text": "unverified"})).text == "unverified"


@pytest.mark.parametrize("http", ["native", "aiohttp"])
async def test_the_pool_is_capped_by_limits(core_url: str, http: str) -> None:
    limits = Limits(max_in_flight=8, max_connections=2)
    async with Client.over_http(core_url, limits=limits, http=http) as client:  # type: ignore[arg-type]
        opened = client.stats.connections_opened
        texts = await asyncio.gather(
            *(client.call_tool("echo", {"text": str(i)}) for i in range(16))
        )
        assert [t.text for t in texts] == [str(i) for i in range(16)]
        assert client.stats.connections_opened - opened <= 2
        assert client.stats.connections_opened <= 2


async def test_a_header_with_a_line_break_is_refused(core_url: str) -> None:
    with pytest.raises(ValueError, match="line break"):
        Client.over_http(core_url, headers={"X-Evil": "a\r\nInjected: 1"}, http="native")
    link = NativeLink(core_url)
    await link.open()
    try:
        with pytest.raises(ValueError, match="line break"):
            await link.send(b"{}", headers={"Mcp-Name": "x\ny"})
    finally:
        await link.close()


async def test_a_long_progress_stream_is_read_to_its_response(core_url: str) -> None:
    async with Client.over_http(core_url, http="native") as client:
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)
            await asyncio.sleep(0)

        result = await client.call_tool("progress", {"steps": 50}, on_progress=on_progress)
        assert result.text == "50 steps"
        assert len(seen) == 50
        assert client.stats.connections_opened == 1


def test_the_link_reads_its_url() -> None:
    link = NativeLink("https://[::1]:8443/a/mcp?x=1")
    assert (link._host, link._port, link._target) == ("::1", 8443, "/a/mcp?x=1")
    assert link._host_header == "[::1]:8443"
    assert NativeLink("http://example.test/mcp")._port == 80
    assert NativeLink("https://example.test")._target == "/"
    with pytest.raises(ValueError, match="not an http"):
        NativeLink("unix:///tmp/sock")
