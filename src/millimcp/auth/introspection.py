"""``IntrospectionVerifier``: opaque tokens checked at the authorization server (RFC 7662).

POSTs ``token=...`` to the introspection endpoint, authenticated as the resource server
(``client_secret_basic``). An active token must be for ``audience`` (``aud``), when the
answer names one, and not expired. Wrap it in the server's verified-token cache (the default)
so that a token is introspected once per ``ProtectedResource.cache_ttl_s``, not per request.
An endpoint that cannot be reached or does not answer 200 refuses the token (the request
gets 401, not 500) and logs a warning naming the endpoint, never the token.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import quote, urlencode

from millimcp.auth.fetch import Fetch, urllib_fetch
from millimcp.auth.resource import Principal

__all__ = ["IntrospectionVerifier"]

log: Final = logging.getLogger("millimcp.auth")


class IntrospectionVerifier:
    def __init__(
        self,
        endpoint: str,
        *,
        client_id: str,
        client_secret: str,
        audience: str | None = None,
        fetch: Fetch | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint = endpoint
        self.audience = audience
        pair = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}"
        self._authorization = "Basic " + base64.b64encode(pair.encode()).decode()
        self._fetch = fetch or urllib_fetch
        self._now = now

    def __repr__(self) -> str:
        return f"<IntrospectionVerifier {self.endpoint}>"

    async def verify(self, token: str) -> Principal | None:
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
            "Authorization": self._authorization,
        }
        body = urlencode({"token": token, "token_type_hint": "access_token"}).encode()
        try:
            status, data = await self._fetch(self.endpoint, body, headers)
        except (OSError, ValueError) as exc:  # unreachable, refused, timed out
            log.warning("token introspection at %s failed: %r", self.endpoint, exc)
            return None
        if status != 200:
            log.warning("token introspection at %s answered HTTP %d", self.endpoint, status)
            return None
        try:
            answer: Any = json.loads(data)
        except ValueError:
            return None
        if not isinstance(answer, dict) or answer.get("active") is not True:
            return None
        exp = answer.get("exp")
        if isinstance(exp, int | float) and exp <= self._now():
            return None
        audience = answer.get("aud")
        audiences = (audience,) if isinstance(audience, str) else tuple(audience or ())
        if self.audience is not None and audiences and self.audience not in audiences:
            return None
        scope = answer.get("scope")
        return Principal(
            subject=answer.get("sub") if isinstance(answer.get("sub"), str) else None,
            client_id=answer.get("client_id") if isinstance(answer.get("client_id"), str) else None,
            scopes=frozenset(scope.split()) if isinstance(scope, str) else frozenset(),
            expires_at=float(exp) if isinstance(exp, int | float) else None,
            issuer=answer.get("iss") if isinstance(answer.get("iss"), str) else None,
            audience=tuple(a for a in audiences if isinstance(a, str)),
            claims=answer,
        )
