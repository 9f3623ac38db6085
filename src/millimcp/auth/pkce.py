"""PKCE (RFC 7636) with ``S256``, and the ``state`` value of an authorization request."""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import NamedTuple

__all__ = ["Pkce", "new_state", "s256"]


def s256(verifier: str) -> str:
    """``BASE64URL(SHA256(verifier))`` without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class Pkce(NamedTuple):
    verifier: str
    challenge: str
    method: str = "S256"

    @classmethod
    def new(cls) -> Pkce:
        """A fresh pair: a 64-character verifier (48 random bytes) and its S256 challenge."""
        verifier = secrets.token_urlsafe(48)
        return cls(verifier, s256(verifier))


def new_state() -> str:
    return secrets.token_urlsafe(24)
