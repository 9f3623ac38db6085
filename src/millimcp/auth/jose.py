"""The one place joserfc is imported (the ``auth`` extra), lazily: signing a client
assertion (``private_key_jwt``) and importing keys. A missing joserfc raises
:class:`~millimcp.errors.MissingExtra`."""

from __future__ import annotations

from typing import Any

from millimcp.errors import MissingExtra

__all__ = ["joserfc_modules", "sign_jwt"]


def joserfc_modules(feature: str) -> tuple[Any, Any]:
    """``(joserfc.jwt, joserfc.jwk)``; MissingExtra names ``feature`` when absent."""
    try:
        from joserfc import jwk, jwt
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] != "joserfc":
            raise
        raise MissingExtra("auth", feature, "joserfc") from None
    return jwt, jwk


def sign_jwt(claims: dict[str, Any], private_key_pem: str, algorithm: str) -> str:
    """A compact JWS of ``claims`` signed with a PEM private key."""
    jwt, jwk = joserfc_modules("private_key_jwt")
    key_type = {"ES": "EC", "RS": "RSA", "PS": "RSA", "Ed": "OKP"}.get(algorithm[:2])
    if key_type is None:
        raise ValueError(f"unsupported signing algorithm {algorithm!r}")
    key = jwk.import_key(private_key_pem, key_type)
    token: str = jwt.encode({"alg": algorithm, "typ": "JWT"}, claims, key, algorithms=[algorithm])
    return token
