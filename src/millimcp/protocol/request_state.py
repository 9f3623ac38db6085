"""Sealed ``requestState`` for multi round-trip requests (MRTR).

The state travels through the client, so it is attacker-controlled input: it is sealed
with HMAC-SHA256 under a server key, bound to the method and the request's salient params
(tool name and a digest of its arguments), and carries an expiry. Anything that fails
verification is rejected with -32602 (Invalid params). The payload is integrity-protected,
not encrypted: put nothing secret in it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from typing import Any, Final

import msgspec

from millimcp.errors import InvalidParams

__all__ = ["RequestStateSealer", "SealedState"]

_VERSION: Final = b"m1"
_URLSAFE: Final = re.compile(rb"[A-Za-z0-9_-]*")


class SealedState(msgspec.Struct, omit_defaults=True):
    """What the server keeps between rounds of one request."""

    binding: str
    """``method`` + ``\\0`` + the salient-params digest: the request this state belongs to."""
    expires: float
    answers: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)
    """Input responses gathered in earlier rounds, by input-request key."""
    user: Any = None
    """Opaque state a handler chose to carry."""


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(SealedState)


class RequestStateSealer:
    """Seals and opens request states with one key (rotate by listing old keys to accept)."""

    __slots__ = ("_keys", "ttl")

    def __init__(self, key: bytes, *, ttl: float = 600.0, previous_keys: tuple[bytes, ...] = ()):
        if len(key) < 16:
            raise ValueError("the request-state key must be at least 16 bytes")
        self._keys = (key, *previous_keys)
        self.ttl = ttl

    @staticmethod
    def binding(method: str, name: str, arguments: bytes) -> str:
        digest = hashlib.sha256(arguments).hexdigest()[:32]
        return f"{method}\0{name}\0{digest}"

    def seal(self, state: SealedState) -> str:
        payload = _ENCODER.encode(state)
        tag = hmac.new(self._keys[0], _VERSION + payload, hashlib.sha256).digest()
        return (_VERSION + b"." + _b64(payload) + b"." + _b64(tag)).decode("ascii")

    def open(self, token: str, binding: str, now: float) -> SealedState:
        """Verify and decode ``token``; raise InvalidParams when it is not ours or not for this."""
        try:
            version, payload_b64, tag_b64 = token.encode("ascii").split(b".")
            payload = _unb64(payload_b64)
            tag = _unb64(tag_b64)
        except (ValueError, UnicodeEncodeError, binascii.Error):
            raise InvalidParams("Invalid params: requestState is malformed") from None
        if version != _VERSION or not any(
            hmac.compare_digest(tag, hmac.new(key, _VERSION + payload, hashlib.sha256).digest())
            for key in self._keys
        ):
            raise InvalidParams("Invalid params: requestState failed verification")
        try:
            state = _DECODER.decode(payload)
        except msgspec.DecodeError:
            raise InvalidParams("Invalid params: requestState is malformed") from None
        if state.binding != binding:
            raise InvalidParams("Invalid params: requestState belongs to another request")
        if state.expires < now:
            raise InvalidParams("Invalid params: requestState has expired")
        return state


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _unb64(data: bytes) -> bytes:
    """Strict unpadded URL-safe base64: any character outside the alphabet is an error."""
    if not _URLSAFE.fullmatch(data):
        raise binascii.Error("not unpadded URL-safe base64")
    return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))
