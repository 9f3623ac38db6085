"""The client flow, sans-I/O: driven step by step against a scripted authorization server."""

from __future__ import annotations

import base64
import json
from collections.abc import Generator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from millimcp.auth import ClientCredentials, Credentials, HeadlessRedirect, OAuth, TokenResponse
from millimcp.auth.challenge import bearer_challenge
from millimcp.auth.flow import ClientFlow
from millimcp.auth.steps import HttpRequest, HttpResponse, Load, Save, UserRedirect
from millimcp.errors import AuthorizationFailed

SERVER = "https://mcp.example.com/mcp"
AS = "https://as.example.com"
PRM_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


class World:
    """An authorization server and a protected resource, as answers to the flow's steps."""

    def __init__(self, **metadata: Any) -> None:
        self.prm: dict[str, Any] = {"resource": SERVER, "authorization_servers": [AS]}
        self.metadata: dict[str, Any] = {
            "issuer": AS,
            "authorization_endpoint": AS + "/authorize",
            "token_endpoint": AS + "/token",
            "registration_endpoint": AS + "/register",
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
            **metadata,
        }
        self.iss: str | None = AS
        self.requests: list[HttpRequest] = []
        self.authorizations: list[dict[str, str]] = []
        self.tokens: list[dict[str, str]] = []
        self.stored: dict[str, Credentials | None] = {}
        self.token_answer: dict[str, Any] = {
            "access_token": "at-1",
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": "rt-1",
        }

    def answer(self, step: Any) -> Any:
        if isinstance(step, Load):
            return self.stored.get(step.resource)
        if isinstance(step, Save):
            self.stored[step.resource] = step.credentials
            return None
        if isinstance(step, UserRedirect):
            query = dict(parse_qsl(urlsplit(step.url).query))
            self.authorizations.append(query)
            back = {"code": "the-code", "state": query["state"]}
            if self.iss is not None:
                back["iss"] = self.iss
            return step.redirect_uri + "?" + urlencode(back)
        assert isinstance(step, HttpRequest)
        self.requests.append(step)
        if step.url == PRM_URL:
            return self.json(self.prm)
        if step.url == AS + "/.well-known/oauth-authorization-server":
            return self.json(self.metadata)
        if step.url == AS + "/register":
            body = json.loads(step.body or b"{}")
            return self.json(
                {"client_id": "dcr-client", "client_secret": "dcr-secret", **body}, 201
            )
        if step.url == AS + "/token":
            fields = dict(parse_qsl((step.body or b"").decode()))
            fields["authorization"] = step.headers.get("Authorization", "")
            self.tokens.append(fields)
            return self.json(self.token_answer)
        return HttpResponse(404, {}, b"")

    @staticmethod
    def json(value: Any, status: int = 200) -> HttpResponse:
        return HttpResponse(
            status, {"content-type": "application/json"}, json.dumps(value).encode()
        )

    def run(self, flow: Generator[Any, Any, None]) -> None:
        answer = None
        while True:
            try:
                step = flow.send(answer)
            except StopIteration:
                return
            answer = self.answer(step)


def oauth(**options: Any) -> OAuth:
    return OAuth(redirect=HeadlessRedirect("http://localhost:3000/callback"), **options)


def challenge(scope: str | None = None, error: str | None = None) -> str:
    return bearer_challenge(resource_metadata=PRM_URL, scope=scope, error=error)


def test_the_whole_flow_with_dynamic_registration() -> None:
    world = World(token_endpoint_auth_methods_supported=["client_secret_basic"])
    flow = ClientFlow(SERVER, oauth(), redirect_uri="http://localhost:3000/callback")
    world.run(flow.challenged(401, challenge("mcp:read")))
    assert flow.authorization() == "Bearer at-1"
    registration = json.loads(
        next(r for r in world.requests if r.url.endswith("/register")).body or b""
    )
    assert registration["application_type"] == "native"
    assert registration["redirect_uris"] == ["http://localhost:3000/callback"]
    assert registration["grant_types"] == ["authorization_code", "refresh_token"]
    query = world.authorizations[0]
    assert query["scope"] == "mcp:read"
    assert query["resource"] == SERVER
    assert query["code_challenge_method"] == "S256"
    assert query["client_id"] == "dcr-client"
    token = world.tokens[0]
    assert token["grant_type"] == "authorization_code"
    assert token["resource"] == SERVER
    assert token["code"] == "the-code"
    assert token["authorization"].startswith("Basic ")
    assert base64.b64decode(token["authorization"][6:]) == b"dcr-client:dcr-secret"
    assert world.stored[flow.key] == flow.credentials


def test_step_up_unions_the_scopes_and_reuses_the_client() -> None:
    world = World()
    flow = ClientFlow(SERVER, oauth(), redirect_uri="http://localhost:3000/callback")
    world.run(flow.challenged(401, challenge("mcp:basic")))
    world.run(flow.challenged(403, challenge("mcp:write", "insufficient_scope")))
    assert [a["scope"] for a in world.authorizations] == ["mcp:basic", "mcp:basic mcp:write"]
    assert sum(r.url.endswith("/register") for r in world.requests) == 1


def test_a_401_with_a_refresh_token_refreshes_first() -> None:
    world = World()
    flow = ClientFlow(SERVER, oauth(), redirect_uri="http://localhost:3000/callback")
    world.run(flow.challenged(401, challenge()))
    world.token_answer = {"access_token": "at-2", "token_type": "bearer", "expires_in": 60}
    world.run(flow.challenged(401, challenge()))
    assert world.tokens[-1]["grant_type"] == "refresh_token"
    assert world.tokens[-1]["refresh_token"] == "rt-1"
    assert world.tokens[-1]["resource"] == SERVER
    assert flow.authorization() == "Bearer at-2"
    assert flow.credentials is not None
    assert flow.credentials.token is not None
    assert flow.credentials.token.refresh_token == "rt-1"  # kept when not rotated
    assert len(world.authorizations) == 1


def test_a_token_near_expiry_is_renewed_before_the_request() -> None:
    clock = [1000.0]
    world = World()
    flow = ClientFlow(
        SERVER, oauth(), redirect_uri="http://localhost:3000/callback", now=lambda: clock[0]
    )
    world.run(flow.prepare())  # loads (nothing stored)
    assert not flow.due()
    world.run(flow.challenged(401, challenge()))
    assert not flow.due()
    clock[0] += 3590
    assert flow.due()
    world.token_answer = {"access_token": "at-3", "refresh_token": "rt-3", "expires_in": 3600}
    world.run(flow.prepare())
    assert flow.authorization() == "Bearer at-3"
    assert world.tokens[-1]["grant_type"] == "refresh_token"


def test_stored_credentials_of_another_issuer_are_never_shown_to_this_one() -> None:
    world = World()
    other = Credentials(
        issuer="https://old-as.example.com",
        token=TokenResponse(access_token="old", refresh_token="old-rt"),
    )
    world.stored["https://mcp.example.com/mcp"] = other
    flow = ClientFlow(SERVER, oauth(), redirect_uri="http://localhost:3000/callback")
    world.run(flow.challenged(401, challenge()))
    assert flow.authorization() == "Bearer at-1"
    assert all("old" not in (r.body or b"").decode() for r in world.requests)
    assert world.authorizations[0]["client_id"] == "dcr-client"


def test_pre_registered_and_cimd_clients() -> None:
    world = World(token_endpoint_auth_methods_supported=["client_secret_post"])
    flow = ClientFlow(
        SERVER,
        oauth(client_id="pre", client_secret="s3"),
        redirect_uri="http://localhost:3000/callback",
    )
    world.run(flow.challenged(401, challenge()))
    assert world.tokens[0]["client_id"] == "pre"
    assert world.tokens[0]["client_secret"] == "s3"
    assert not any(r.url.endswith("/register") for r in world.requests)

    world = World(client_id_metadata_document_supported=True)
    cimd = "https://client.example.com/metadata.json"
    flow = ClientFlow(
        SERVER, oauth(client_metadata_url=cimd), redirect_uri="http://localhost:3000/callback"
    )
    world.run(flow.challenged(401, challenge()))
    assert world.authorizations[0]["client_id"] == cimd
    assert world.tokens[0]["client_id"] == cimd
    assert world.tokens[0]["authorization"] == ""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"prm": {"resource": "https://evil.example.com/mcp", "authorization_servers": [AS]}},
            "not this server",
        ),
        (
            {"metadata": {"issuer": "https://attacker.example.com"}},
            "no usable authorization server",
        ),
        ({"metadata": {"code_challenge_methods_supported": ["plain"]}}, "PKCE"),
        ({"iss": None}, "lacks the iss"),
        ({"iss": AS + "/"}, "came from"),
        ({"metadata": {"authorization_endpoint": "http://as.example.com/authorize"}}, "not https"),
    ],
)
def test_refusals_before_any_token_request(change: dict[str, Any], message: str) -> None:
    world = World()
    if "prm" in change:
        world.prm = change["prm"]
    if "metadata" in change:
        world.metadata.update(change["metadata"])
    if "iss" in change:
        world.iss = change["iss"]
    flow = ClientFlow(SERVER, oauth(), redirect_uri="http://localhost:3000/callback")
    with pytest.raises(AuthorizationFailed, match=message):
        world.run(flow.challenged(401, challenge()))
    assert world.tokens == []


def test_iss_absent_and_not_advertised_proceeds() -> None:
    world = World()
    del world.metadata["authorization_response_iss_parameter_supported"]
    world.iss = None
    flow = ClientFlow(SERVER, oauth(), redirect_uri="http://localhost:3000/callback")
    world.run(flow.challenged(401, challenge()))
    assert flow.authorization() == "Bearer at-1"


def test_discovery_falls_back_to_the_well_known_urls() -> None:
    world = World()
    flow = ClientFlow(SERVER, oauth(), redirect_uri="http://localhost:3000/callback")
    world.run(flow.challenged(401, None))  # no challenge header at all
    assert world.requests[0].url == PRM_URL
    world.prm = {}
    with pytest.raises(AuthorizationFailed, match="no protected resource metadata"):
        world.run(ClientFlow(SERVER, oauth(), redirect_uri="x").challenged(401, None))


def test_client_credentials_basic() -> None:
    world = World(grant_types_supported=["client_credentials"])
    flow = ClientFlow(SERVER, ClientCredentials(client_id="svc", client_secret="pw", scopes=("a",)))
    world.run(flow.challenged(401, challenge()))
    token = world.tokens[0]
    assert token["grant_type"] == "client_credentials"
    assert token["scope"] == "a"
    assert token["resource"] == SERVER
    assert base64.b64decode(token["authorization"][6:]) == b"svc:pw"
    assert world.authorizations == []
    assert flow.authorization() == "Bearer at-1"


def test_client_credentials_private_key_jwt() -> None:
    from joserfc import jwt
    from joserfc.jwk import ECKey

    key = ECKey.generate_key("P-256")
    pem = key.as_pem(private=True).decode()
    world = World()
    flow = ClientFlow(SERVER, ClientCredentials(client_id="svc", private_key=pem))
    world.run(flow.challenged(401, challenge()))
    token = world.tokens[0]
    assert (
        token["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    )
    claims = jwt.decode(token["client_assertion"], key, algorithms=["ES256"]).claims
    assert claims["iss"] == claims["sub"] == "svc"
    assert claims["aud"] == AS


def test_token_endpoint_errors_are_reported_without_the_secret() -> None:
    world = World()
    world.token_answer = {}

    def refuse(step: Any, original: Any = world.answer) -> Any:
        if isinstance(step, HttpRequest) and step.url == AS + "/token":
            return World.json({"error": "invalid_client", "error_description": "bad"}, 401)
        return original(step)

    world.answer = refuse  # type: ignore[method-assign]
    flow = ClientFlow(SERVER, oauth(client_id="c", client_secret="very-secret"), redirect_uri="x")
    with pytest.raises(AuthorizationFailed, match="invalid_client: bad") as failed:
        world.run(flow.challenged(401, challenge()))
    assert "very-secret" not in str(failed.value)
