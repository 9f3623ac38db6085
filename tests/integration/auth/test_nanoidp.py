"""A real authorization server: nanoidp (PyPI) on a free port, in front of a millimcp server.

nanoidp issues RS256 JWTs whose ``aud`` is the requested ``resource`` (RFC 8707); its persona
auto-login (``login_hint=persona-auto-login:<user>``) approves the authorization request at
once, so :class:`~millimcp.auth.HeadlessRedirect` reads the code from the redirect. The
millimcp server verifies the tokens with :class:`~millimcp.auth.JwtVerifier`, which finds
nanoidp's JWKS through its RFC 8414 metadata over real HTTP.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from millimcp import Client, Context, Server
from millimcp.auth import (
    ClientCredentials,
    HeadlessRedirect,
    IntrospectionVerifier,
    JwtVerifier,
    LoopbackBrowser,
    MemoryTokenStorage,
    OAuth,
    ProtectedResource,
)
from millimcp.testing import modern_request
from millimcp.testing.processes import free_port, start_subprocess, stop_process

pytestmark = pytest.mark.slow

pytest.importorskip("nanoidp")

SETTINGS = """\
config_version: 1
server:
  host: "127.0.0.1"
  port: {port}
oauth:
  issuer: "http://127.0.0.1:{port}"
  audience: "default"
  require_pkce: true
  dynamic_registration:
    enabled: true
  clients:
    - client_id: "machine"
      client_secret: "machine-secret"
login:
  mode: persona
  auto_login: true
"""


@pytest.fixture(scope="module")
def nanoidp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """nanoidp's issuer URL (the process runs for this module)."""
    config = tmp_path_factory.mktemp("nanoidp") / "config"
    subprocess.run(
        [sys.executable, "-m", "nanoidp", "init", str(config)],
        cwd=config.parent,  # nanoidp writes its signing keys under the working directory
        check=True,
        capture_output=True,
        timeout=60,
    )
    port = free_port()
    (config / "settings.yaml").write_text(SETTINGS.format(port=port))
    process = start_subprocess(
        [
            sys.executable,
            "-m",
            "nanoidp",
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        port,
        cwd=config.parent,
        stderr=subprocess.DEVNULL,
        timeout=60,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)


def protected(
    issuer: str, mcp_url: str, verifier: JwtVerifier | None = None, **options: Any
) -> Server:
    """A server with one tool, ``whoami``, protected by ``issuer``'s tokens."""
    server = Server(
        "orders",
        auth=ProtectedResource(
            resource=mcp_url,
            authorization_servers=[issuer],
            scopes_supported=["profile"],
            verifier=verifier or JwtVerifier(issuer=issuer, audience=mcp_url),
            **options,
        ),
    )

    @server.tool
    async def whoami(ctx: Context) -> str:
        assert ctx.principal is not None
        return str(ctx.principal.subject)

    return server


async def test_millimcp_client_and_server_with_nanoidp(nanoidp: str, serve: Any) -> None:
    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    await serve(protected(nanoidp, mcp_url).asgi(), port=port)
    storage = MemoryTokenStorage()
    auth = OAuth(
        client_name="millimcp-tests",
        redirect=HeadlessRedirect("http://127.0.0.1:9/callback"),
        authorize_params={"login_hint": "persona-auto-login:admin"},
        storage=storage,
    )
    async with Client.over_http(mcp_url, auth=auth) as client:
        assert (await client.call_tool("whoami", {})).text == "admin"
    stored = await storage.load(mcp_url)
    assert stored is not None
    assert stored.issuer == nanoidp
    assert stored.client is not None  # registered dynamically with nanoidp
    # a second client reuses the stored token: no new authorization
    async with Client.over_http(mcp_url, auth=auth) as client:
        assert (await client.call_tool("whoami", {})).text == "admin"
    again = await storage.load(mcp_url)
    assert again is not None
    assert again.token == stored.token


async def test_client_credentials_with_nanoidp(nanoidp: str, serve: Any, tmp_path: Path) -> None:
    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    await serve(protected(nanoidp, mcp_url).asgi(), port=port)
    auth = ClientCredentials(client_id="machine", client_secret="machine-secret")
    async with Client.over_http(mcp_url, auth=auth) as client:
        assert (await client.call_tool("whoami", {})).text


async def test_the_official_clients_oauth_provider(nanoidp: str, serve: Any) -> None:
    """mcp 2.3.0's OAuthClientProvider (httpx2 auth) against the millimcp resource server."""
    import httpx2
    from mcp import Client as OfficialClient
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import (
        AuthorizationCodeResult,
        OAuthClientInformationFull,
        OAuthClientMetadata,
        OAuthToken,
    )
    from pydantic import AnyUrl

    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    await serve(protected(nanoidp, mcp_url).asgi(), port=port)

    class Storage:
        def __init__(self) -> None:
            self.tokens: OAuthToken | None = None
            self.client: OAuthClientInformationFull | None = None

        async def get_tokens(self) -> OAuthToken | None:
            return self.tokens

        async def set_tokens(self, tokens: OAuthToken) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> OAuthClientInformationFull | None:
            return self.client

        async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
            self.client = client_info

    redirected: list[str] = []

    async def redirect(url: str) -> None:  # the persona auto-login answers at once
        async with httpx2.AsyncClient() as http:
            response = await http.get(url + "&login_hint=persona-auto-login%3Aadmin")
        assert response.status_code in (302, 303), response.text[:300]
        redirected.append(response.headers["location"])

    async def callback() -> AuthorizationCodeResult:
        query = dict(parse_qsl(urlsplit(redirected[-1]).query))
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )

    provider = OAuthClientProvider(
        mcp_url,
        OAuthClientMetadata(
            client_name="official-client",
            redirect_uris=[AnyUrl("http://127.0.0.1:9/callback")],
            grant_types=["authorization_code", "refresh_token"],
        ),
        Storage(),
        redirect_handler=redirect,
        callback_handler=callback,
    )
    async with (
        httpx2.AsyncClient(auth=provider, timeout=30) as http,
        OfficialClient(streamable_http_client(mcp_url, http_client=http), mode="auto") as client,
    ):
        result = await client.call_tool("whoami", {})
    assert [getattr(block, "text", None) for block in result.content] == ["admin"]
    assert redirected


async def test_a_person_in_the_browser(
    nanoidp: str, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LoopbackBrowser: the "browser" (urllib, following redirects) lands on the client's
    loopback listener with the code."""
    import urllib.request
    import webbrowser

    opened: list[str] = []

    def browser(url: str) -> bool:
        opened.append(url)
        with urllib.request.urlopen(url, timeout=30) as page:
            assert b"close this window" in page.read()
        return True

    monkeypatch.setattr(webbrowser, "open", browser)
    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    await serve(protected(nanoidp, mcp_url).asgi(), port=port)
    auth = OAuth(
        client_name="millimcp-browser",
        redirect=LoopbackBrowser(),
        authorize_params={"login_hint": "persona-auto-login:testuser"},
    )
    async with Client.over_http(mcp_url, auth=auth) as client:
        assert (await client.call_tool("whoami", {})).text == "testuser"
    assert len(opened) == 1
    assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in opened[0]


async def test_concurrent_calls_share_one_authorization(nanoidp: str, serve: Any) -> None:
    """Ten calls meet a 401 together (their token revoked): one flow runs, the others wait
    for it and resend with its token."""
    import asyncio

    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    app = protected(nanoidp, mcp_url).asgi()
    revoked: set[bytes] = set()
    refused: list[bytes] = []

    async def revoking(scope: Any, receive: Any, send: Any) -> None:
        headers = scope.get("headers", [])
        token = dict(headers).get(b"authorization")
        if token in revoked:  # the gate then answers 401 as for a request without a token
            refused.append(token)
            scope = {**scope, "headers": [h for h in headers if h[0] != b"authorization"]}
        await app(scope, receive, send)

    await serve(revoking, port=port)

    class CountingStorage(MemoryTokenStorage):
        saves = 0

        async def save(self, resource: str, credentials: Any) -> None:
            self.saves += 1
            await super().save(resource, credentials)

    storage = CountingStorage()
    auth = OAuth(
        client_name="millimcp-concurrent",
        redirect=HeadlessRedirect("http://127.0.0.1:9/callback"),
        authorize_params={"login_hint": "persona-auto-login:admin"},
        storage=storage,
    )
    async with Client.over_http(mcp_url, auth=auth) as client:
        assert (await client.call_tool("whoami", {})).text == "admin"
        assert storage.saves == 1
        first = await storage.load(mcp_url)
        assert first is not None
        assert first.token is not None
        revoked.add(b"Bearer " + first.token.access_token.encode())
        results = await asyncio.gather(*(client.call_tool("whoami", {}) for _ in range(10)))
    assert [r.text for r in results] == ["admin"] * 10
    assert len(refused) > 1  # several requests met the 401...
    assert storage.saves == 2  # ...and one flow (here a refresh) served them all


async def test_millimcp_client_against_the_official_server(nanoidp: str, serve: Any) -> None:
    """The official MCPServer with AuthSettings (its tokens checked by an SDK TokenVerifier
    wrapping millimcp's JwtVerifier), reached by millimcp's OAuth client."""
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from pydantic import AnyHttpUrl

    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    jwt = JwtVerifier(issuer=nanoidp, audience=mcp_url)

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            principal = await jwt.verify(token)
            if principal is None:
                return None
            return AccessToken(
                token=token,
                client_id=principal.client_id or "unknown",
                scopes=sorted(principal.scopes),
                expires_at=int(principal.expires_at or 0) or None,
                subject=principal.subject,
            )

    official = MCPServer(
        "official-protected",
        token_verifier=Verifier(),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(nanoidp),
            resource_server_url=AnyHttpUrl(mcp_url),
            required_scopes=[],
            validate_token_resource=False,  # the verifier checks the audience itself
        ),
    )

    @official.tool()
    def greet() -> str:
        return "hello from the official server"

    await serve(official.streamable_http_app(), port=port)
    auth = OAuth(
        client_name="millimcp-to-official",
        redirect=HeadlessRedirect("http://127.0.0.1:9/callback"),
        authorize_params={"login_hint": "persona-auto-login:admin"},
    )
    async with Client.over_http(mcp_url, auth=auth) as client:
        assert (await client.call_tool("greet", {})).text == "hello from the official server"


async def test_the_client_refreshes_before_the_token_expires(nanoidp: str, serve: Any) -> None:
    """nanoidp's shortest token lifetime is a minute; here the server's clock runs that much
    minus 3 s ahead, so a token expires for it 3 s after it was issued. The client renews
    it with its refresh token ``refresh_margin_s`` before that, so no call meets a 401."""
    import asyncio
    import time

    import httpx

    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    ahead = 3600.0 - 3.0  # nanoidp's default lifetime: an hour
    verifier = JwtVerifier(
        issuer=nanoidp, audience=mcp_url, leeway_s=0, now=lambda: time.time() + ahead
    )
    # cache_size=0: the cache's clock is the real one
    app = protected(nanoidp, mcp_url, verifier, cache_size=0).asgi()
    statuses: list[int] = []

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        async def record(message: Any) -> None:
            if message["type"] == "http.response.start" and scope["path"] == "/mcp":
                statuses.append(message["status"])
            await send(message)

        await app(scope, receive, record)

    await serve(recording, port=port)
    storage = MemoryTokenStorage()
    auth = OAuth(
        client_name="millimcp-refresh",
        redirect=HeadlessRedirect("http://127.0.0.1:9/callback"),
        authorize_params={"login_hint": "persona-auto-login:admin"},
        storage=storage,
        refresh_margin_s=3600.0 - 2.0,  # renew 2 s after issue, a second before it expires
    )
    async with Client.over_http(mcp_url, auth=auth) as client:
        assert (await client.call_tool("whoami", {})).text == "admin"
        first = await storage.load(mcp_url)
        assert first is not None
        assert first.token is not None
        assert first.token.refresh_token
        old = first.token.access_token
        assert statuses.count(401) == 1  # the first request, before any token
        await asyncio.sleep(2.2)
        assert (await client.call_tool("whoami", {})).text == "admin"
        assert statuses.count(401) == 1  # renewed before the call: no refusal
        renewed = await storage.load(mcp_url)
        assert renewed is not None
        assert renewed.token is not None
        assert renewed.token.access_token != old
        await asyncio.sleep(1.0)  # now the first token has expired for the server
        body, headers = modern_request("tools/call", {"name": "whoami", "arguments": {}})
        async with httpx.AsyncClient() as http:
            stale = await http.post(
                mcp_url, content=body, headers={**headers, "authorization": f"Bearer {old}"}
            )
        assert stale.status_code == 401


async def test_introspection_at_nanoidp(nanoidp: str) -> None:
    """IntrospectionVerifier against nanoidp's RFC 7662 endpoint, the resource server
    authenticating as the pre-registered ``machine`` client."""
    import httpx

    mcp_url = "http://127.0.0.1:1/mcp"
    async with httpx.AsyncClient() as http:
        issued = await http.post(
            nanoidp + "/token",
            data={"grant_type": "client_credentials", "resource": mcp_url},
            auth=("machine", "machine-secret"),
        )
    assert issued.status_code == 200, issued.text
    token = issued.json()["access_token"]
    endpoint = nanoidp + "/introspect"
    check = IntrospectionVerifier(
        endpoint, client_id="machine", client_secret="machine-secret", audience=mcp_url
    )
    principal = await check.verify(token)
    assert principal is not None
    assert principal.client_id == "machine"
    assert principal.issuer == nanoidp
    assert principal.expires_at is not None
    assert await check.verify(token[:-4] + "AAAA") is None  # a broken signature: inactive
    other = IntrospectionVerifier(
        endpoint,
        client_id="machine",
        client_secret="machine-secret",
        audience="http://127.0.0.1:2/mcp",
    )
    assert await other.verify(token) is None  # issued for another resource
    wrong = IntrospectionVerifier(endpoint, client_id="machine", client_secret="nope")
    assert await wrong.verify(token) is None  # nanoidp refuses the resource server


def test_the_docs_example_runs_against_nanoidp(nanoidp: str) -> None:
    """examples/auth_nanoidp.py, as docs/auth.md runs it: the server, then the client."""
    example = Path(__file__).parents[3] / "examples" / "auth_nanoidp.py"
    port = free_port()
    server = start_subprocess(
        [sys.executable, str(example), "server", "--issuer", nanoidp, "--port", str(port)],
        port,
        stderr=subprocess.DEVNULL,
        timeout=60,
    )
    try:
        out = subprocess.run(
            [sys.executable, str(example), "client", "--url", f"http://127.0.0.1:{port}/mcp"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        stop_process(server)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "admin"
