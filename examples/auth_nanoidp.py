"""A protected millimcp server and an OAuth client, with nanoidp as the authorization server.

docs/auth.md ("A runnable example against nanoidp") starts nanoidp on 127.0.0.1:9000; then:

    python examples/auth_nanoidp.py server                       # http://127.0.0.1:8000/mcp
    python examples/auth_nanoidp.py client                       # prints: admin

The server is an OAuth protected resource: it checks nanoidp's JWTs (JWKS found through
nanoidp's RFC 8414 metadata) and answers ``whoami`` with the token's subject. The client
meets the 401, discovers nanoidp, registers itself (RFC 7591), and authorizes headlessly:
nanoidp's persona auto-login approves ``login_hint=persona-auto-login:admin`` at once, so
:class:`~millimcp.auth.HeadlessRedirect` reads the code from the redirect without a browser.
``--issuer``, ``--port`` and ``--url`` point them elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio

from millimcp import Client, Context, Server
from millimcp.auth import HeadlessRedirect, JwtVerifier, OAuth, ProtectedResource

ISSUER = "http://127.0.0.1:9000"


def build_server(issuer: str, mcp_url: str) -> Server:
    server = Server(
        "hello",
        auth=ProtectedResource(
            resource=mcp_url,
            authorization_servers=[issuer],
            scopes_supported=["profile"],
            verifier=JwtVerifier(issuer=issuer, audience=mcp_url),
        ),
    )

    @server.tool
    async def whoami(ctx: Context) -> str:
        """The subject of the caller's access token."""
        assert ctx.principal is not None
        return str(ctx.principal.subject)

    return server


async def call_whoami(mcp_url: str, user: str = "admin") -> str:
    auth = OAuth(
        client_name="hello-agent",
        redirect=HeadlessRedirect("http://127.0.0.1:9/callback"),
        authorize_params={"login_hint": f"persona-auto-login:{user}"},
    )
    async with Client.over_http(mcp_url, auth=auth) as client:
        return (await client.call_tool("whoami", {})).text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="role", required=True)
    serve = sub.add_parser("server", help="serve the protected MCP endpoint")
    serve.add_argument("--issuer", default=ISSUER)
    serve.add_argument("--port", type=int, default=8000)
    call = sub.add_parser("client", help="authorize and call whoami")
    call.add_argument("--url", default="http://127.0.0.1:8000/mcp")
    call.add_argument("--user", default="admin")
    args = parser.parse_args()
    if args.role == "server":
        mcp_url = f"http://127.0.0.1:{args.port}/mcp"
        build_server(args.issuer, mcp_url).run_http(host="127.0.0.1", port=args.port)
    else:
        print(asyncio.run(call_whoami(args.url, args.user)))


if __name__ == "__main__":
    main()
