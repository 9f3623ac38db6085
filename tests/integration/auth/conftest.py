"""A protected millimcp server on a real socket (in the test's loop) and JWTs.

A millimcp endpoint app, protected or not, is served on the tests' HTTP front (``FRONT``:
native, or ``MILLIMCP_HTTP_FRONT``); any other ASGI app (a fake authorization server) on
uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from millimcp.testing.processes import free_port
from millimcp.transports.native import NativeServer
from millimcp.transports.native.server import endpoint_of
from tests.conftest import FRONT

ISSUER = "https://auth.example.com"


class Keys:
    """An RSA signing key, its public JWKS, and tokens signed with it."""

    def __init__(self, kid: str) -> None:
        self.kid = kid
        self.key = RSAKey.generate_key(2048, parameters={"kid": kid})

    def jwks(self) -> dict[str, Any]:
        return dict(KeySet([self.key]).as_dict(private=False))

    def token(self, audience: str, scope: str = "", **claims: Any) -> str:
        now = int(time.time())
        body = {
            "iss": ISSUER,
            "aud": audience,
            "sub": "alice",
            "client_id": "agent",
            "iat": now,
            "exp": now + 600,
            "scope": scope,
            **claims,
        }
        return jwt.encode({"alg": "RS256", "kid": self.kid}, body, self.key)


@pytest.fixture(scope="session")
def keys() -> Keys:
    return Keys("key-1")


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Any], Any]]:
    """``url = await serve(app)``: the app served on 127.0.0.1 until the test ends."""
    servers: list[tuple[uvicorn.Server, asyncio.Task[None]]] = []
    async with contextlib.AsyncExitStack() as natives:

        async def start(app: Any, port: int | None = None) -> str:
            port = port or free_port()
            served = endpoint_of(app)
            if FRONT == "native" and served is not None:
                lifespan = served[0]._lifespan
                if lifespan is not None:
                    await natives.enter_async_context(lifespan())
                native = NativeServer(app, port=port)
                await native.start()
                natives.push_async_callback(native.close)
                return f"http://127.0.0.1:{port}"
            config = uvicorn.Config(
                app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"
            )
            server = uvicorn.Server(config)
            task = asyncio.create_task(server.serve())
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)
            servers.append((server, task))
            return f"http://127.0.0.1:{port}"

        yield start
        for server, task in servers:
            server.should_exit = True
            await task


@pytest.fixture(params=["native", "aiohttp"], autouse=True)
def http_link_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs over both HTTP client links: both drive the authorization flow."""
    from millimcp.client import http_choice

    kind: str = request.param
    monkeypatch.setattr(http_choice, "DEFAULT", kind)
    return kind
