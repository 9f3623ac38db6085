"""``JwtVerifier``: JWT access tokens (RFC 9068) checked locally against the issuer's JWKS.

Checks, in order: the header's ``alg`` is one of ``algorithms`` (asymmetric ones by default:
``none`` and HMAC are never accepted unless listed, so an HS256 token "signed" with the RSA
public key is refused), the signature against the JWKS key of its ``kid``, then ``iss``
(exact), ``aud`` (contains ``audience``), ``exp`` (required) and ``nbf`` with ``leeway_s``.
Scopes come from ``scope`` (space-separated) or ``scp`` (a list).

The JWKS is fetched asynchronously from ``jwks_uri`` (else from the issuer's authorization
server metadata), cached, and fetched again when a token names a ``kid`` it does not hold, at
most once per ``refetch_interval_s``: key rotation works, a flood of made-up ``kid`` values
does not become a flood of fetches. Needs joserfc (the ``auth`` extra), imported on first use.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import msgspec

from millimcp.auth.fetch import Fetch, urllib_fetch
from millimcp.auth.jose import joserfc_modules
from millimcp.auth.metadata import AuthorizationServerMetadata, decode_document
from millimcp.auth.resource import Principal
from millimcp.auth.urls import as_metadata_urls

__all__ = ["JwtVerifier"]

log: Final = logging.getLogger("millimcp.auth")

DEFAULT_ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")


def _header(token: str) -> dict[str, Any] | None:
    head = token.partition(".")[0]
    try:
        value = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


class JwtVerifier:
    """See the module docstring."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_uri: str | None = None,
        jwks: Mapping[str, Any] | None = None,
        algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
        leeway_s: float = 30.0,
        refetch_interval_s: float = 60.0,
        fetch: Fetch | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        if "none" in algorithms:
            raise ValueError("alg 'none' is never accepted")
        self.issuer = issuer
        self.audience = audience
        self.jwks_uri = jwks_uri
        self.algorithms = tuple(algorithms)
        self.leeway_s = leeway_s
        self.refetch_interval_s = refetch_interval_s
        self.fetches = 0
        """JWKS documents fetched so far."""
        self._fetch = fetch or urllib_fetch
        self._now = now
        self._keys: Any = None
        self._kids: frozenset[str] = frozenset()
        self._fetched_at = -float("inf")
        self._lock = asyncio.Lock()
        self._jwt, self._jwk = joserfc_modules("JwtVerifier")
        if jwks is not None:
            self._load(dict(jwks))

    def __repr__(self) -> str:
        return f"<JwtVerifier iss={self.issuer!r} aud={self.audience!r} {len(self._kids)} keys>"

    def _load(self, jwks: dict[str, Any]) -> None:
        self._keys = self._jwk.KeySet.import_key_set(jwks)
        self._kids = frozenset(k.get("kid") for k in jwks.get("keys", ()) if k.get("kid"))

    async def _refresh_keys(self) -> None:
        async with self._lock:
            if self._now() - self._fetched_at < self.refetch_interval_s:
                return
            self._fetched_at = self._now()
            try:
                uri = self.jwks_uri or await self._discover_jwks_uri()
                if uri is None:
                    return
                self.jwks_uri = uri
                status, body = await self._fetch(uri, None, {"Accept": "application/json"})
            except (OSError, ValueError) as exc:  # unreachable: the keys held stay
                log.warning("JWKS fetch for issuer %s failed: %r", self.issuer, exc)
                return
            if status != 200:
                log.warning("JWKS fetch from %s: HTTP %d", uri, status)
                return
            try:
                self._load(json.loads(body))
                self.fetches += 1
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("JWKS from %s is malformed: %r", uri, exc)

    async def _discover_jwks_uri(self) -> str | None:
        for url in as_metadata_urls(self.issuer):
            status, body = await self._fetch(url, None, {"Accept": "application/json"})
            if status != 200:
                continue
            try:
                server = decode_document(AuthorizationServerMetadata, body)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if server.issuer == self.issuer and server.jwks_uri:
                return server.jwks_uri
        log.warning("no jwks_uri found for issuer %s", self.issuer)
        return None

    async def verify(self, token: str) -> Principal | None:
        header = _header(token)
        if header is None or header.get("alg") not in self.algorithms:
            return None
        kid = header.get("kid")
        if self._keys is None or (kid is not None and kid not in self._kids):
            await self._refresh_keys()
            if self._keys is None:
                return None
        try:
            decoded = self._jwt.decode(token, self._keys, algorithms=list(self.algorithms))
        except Exception:  # joserfc's errors (bad signature, unknown key, malformed...)
            return None
        return self._principal(decoded.claims)

    def _principal(self, claims: dict[str, Any]) -> Principal | None:
        now, leeway = self._now(), self.leeway_s
        if claims.get("iss") != self.issuer:
            return None
        audience = claims.get("aud")
        audiences = (audience,) if isinstance(audience, str) else tuple(audience or ())
        if self.audience not in audiences:
            return None
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or exp + leeway <= now:
            return None
        nbf = claims.get("nbf")
        if isinstance(nbf, int | float) and nbf - leeway > now:
            return None
        scope = claims.get("scope")
        scp = claims.get("scp")
        scopes = (
            scope.split() if isinstance(scope, str) else list(scp) if isinstance(scp, list) else []
        )
        client = claims.get("client_id") or claims.get("azp")
        subject = claims.get("sub")
        return Principal(
            subject=subject if isinstance(subject, str) else None,
            client_id=client if isinstance(client, str) else None,
            scopes=frozenset(s for s in scopes if isinstance(s, str)),
            expires_at=float(exp),
            issuer=self.issuer,
            audience=tuple(a for a in audiences if isinstance(a, str)),
            claims=claims,
        )
