"""millimcp with ``Server(auth=ProtectedResource(...))``: the ``echo`` tool behind a JWT
check (ES256, JwtVerifier with a static JWKS, the verified-token cache on). Every request
carries the same token, so after the first call each check is a cache hit: the steady-state
cost of auth per call. ``HEADERS`` are what the benchmark drivers add to each request."""

import time

from joserfc import jwt
from joserfc.jwk import ECKey

from millimcp import Server
from millimcp.auth import JwtVerifier, ProtectedResource

# A benchmark-only key (public by being here; it protects nothing).
KEY = ECKey.import_key(
    {
        "kty": "EC",
        "crv": "P-256",
        "kid": "bench",
        "x": "NneQs-oJu79B1RNudmTu-TaH2CqBpvMQ2gKG4yL8s6g",
        "y": "aSJqGscFy5_UiLXy9hOTEimDSAkE5LMz6VFayIJvrNQ",
        "d": "nRsEEgH2oWNq_DcM0B-rw-v3qENJH5wOjcLs9Jp4Lf4",
    }
)
ISSUER = "https://auth.example.com"
RESOURCE = "http://127.0.0.1:8000/mcp"
TOKEN = jwt.encode(
    {"alg": "ES256", "kid": "bench"},
    {
        "iss": ISSUER,
        "aud": RESOURCE,
        "sub": "bench",
        "scope": "echo",
        "iat": 1_800_000_000,
        "exp": int(time.time()) + 86_400,
    },
    KEY,
)
HEADERS = [(b"authorization", b"Bearer " + TOKEN.encode())]

server = Server(
    "bench",
    version="1.0.0",
    auth=ProtectedResource(
        resource=RESOURCE,
        authorization_servers=[ISSUER],
        required_scopes=["echo"],
        verifier=JwtVerifier(
            issuer=ISSUER,
            audience=RESOURCE,
            jwks={"keys": [KEY.as_dict(private=False)]},
            algorithms=["ES256"],
        ),
    ),
)


@server.tool()
async def echo(text: str) -> str:
    return text


app = server.asgi()
