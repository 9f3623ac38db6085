"""The auth and permission step of every call (S6.2): HMAC-signed bearer tokens.

A token is ``<claims>.<signature>``, both base64url without padding: the claims are JSON
``{"sub": "agent-7", "customers": [1, 2] | "*", "scopes": ["orders:read", ...], "exp": 1.8e9}``
and the signature is HMAC-SHA256 of the claims' bytes under the service's secret. The client
sends ``Authorization: Bearer <token>``; every tool call verifies the signature (constant
time), the expiry, the scope and that the caller may see that customer. A failure is a tool
error whose text says which check failed.

    token = mint("orders-demo-secret", "agent-1", customers="*")
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from millimcp import ToolError

__all__ = ["Caller", "Verifier", "mint"]

READ = "orders:read"
WRITE = "orders:write"


class _Claims(msgspec.Struct, forbid_unknown_fields=True):
    sub: str
    customers: list[int] | Literal["*"]
    scopes: list[str]
    exp: float


_decode_claims = msgspec.json.Decoder(_Claims).decode


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint(
    secret: str,
    subject: str,
    *,
    customers: Iterable[int] | Literal["*"] = "*",
    scopes: Iterable[str] = (READ, WRITE),
    ttl_s: float = 3600.0,
) -> str:
    """A signed token for ``subject``, valid ``ttl_s`` seconds."""
    claims = _Claims(
        sub=subject,
        customers="*" if customers == "*" else sorted(customers),
        scopes=list(scopes),
        exp=time.time() + ttl_s,
    )
    body = msgspec.json.encode(claims)
    signature = hmac.new(secret.encode(), body, hashlib.sha256).digest()
    return f"{_b64(body)}.{_b64(signature)}"


@dataclass(frozen=True, slots=True)
class Caller:
    """A verified caller."""

    subject: str
    customers: frozenset[int] | None
    """The customers it may see; None: all of them."""
    scopes: frozenset[str]

    def check(self, customer_id: int, scope: str = READ) -> None:
        if scope not in self.scopes:
            raise ToolError(f"permission denied: {self.subject!r} lacks the {scope} scope")
        if self.customers is not None and customer_id not in self.customers:
            raise ToolError(
                f"permission denied: {self.subject!r} may not access customer {customer_id}"
            )


class Verifier:
    """Verifies the bearer token of a request's headers."""

    def __init__(self, secret: str) -> None:
        self._key = secret.encode()

    def caller(self, ctx: Any) -> Caller:
        """The verified caller of this request, or a :class:`ToolError` saying why not."""
        headers = getattr(ctx, "headers", None)
        raw = getattr(headers, "raw", None) or ()
        value = next((v for k, v in raw if k == b"authorization"), None)
        if value is None:
            raise ToolError("unauthenticated: send 'Authorization: Bearer <token>'")
        scheme, _, token = value.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or "." not in token:
            raise ToolError("unauthenticated: the Authorization header is not a bearer token")
        body_text, _, signature_text = token.strip().partition(".")
        try:
            body, signature = _unb64(body_text), _unb64(signature_text)
        except ValueError:
            raise ToolError("unauthenticated: the token is not base64url") from None
        expected = hmac.new(self._key, body, hashlib.sha256).digest()
        if not hmac.compare_digest(expected, signature):
            raise ToolError("unauthenticated: bad token signature")
        try:
            claims = _decode_claims(body)
        except msgspec.DecodeError:
            raise ToolError("unauthenticated: malformed token claims") from None
        if claims.exp < time.time():
            raise ToolError("unauthenticated: the token has expired")
        return Caller(
            claims.sub,
            None if claims.customers == "*" else frozenset(claims.customers),
            frozenset(claims.scopes),
        )
