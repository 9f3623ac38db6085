"""Cache keys, tags and principals, derived from a call's arguments and context."""

from __future__ import annotations

import hashlib
import string
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from millimcp.errors import ConfigurationError

__all__ = ["TagTemplate", "argument_key", "default_principal"]

_encoder: Final = msgspec.json.Encoder(order="sorted", enc_hook=lambda v: _to_builtins(v))


def _to_builtins(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)  # pydantic models
    if dump is not None:
        return dump(mode="json")
    raise TypeError(f"cannot use a {type(value).__name__} in a cache key")


def argument_key(kwargs: dict[str, Any], key: Callable[..., Any] | None) -> bytes:
    """Canonical bytes for a call: its arguments (or ``key(**kwargs)``), keys sorted."""
    return _encoder.encode(kwargs if key is None else key(**kwargs))


class TagTemplate:
    """A tag such as ``"orders:{user_id}"``, checked against the tool's parameters."""

    __slots__ = ("fields", "template")

    def __init__(self, template: str, parameters: Sequence[str], owner: str) -> None:
        fields = []
        for _, field, spec, conversion in string.Formatter().parse(template):
            if field is None:
                continue
            if field not in parameters or spec or conversion:
                raise ConfigurationError(
                    f"{owner}: tag {template!r} uses {{{field}}}, which is not a plain "
                    "parameter of the tool"
                )
            fields.append(field)
        self.template = template
        self.fields = tuple(fields)

    def __repr__(self) -> str:
        return f"<TagTemplate {self.template!r}>"

    def format(self, kwargs: dict[str, Any]) -> str:
        if not self.fields:
            return self.template
        return self.template.format_map({field: kwargs.get(field) for field in self.fields})


def default_principal(ctx: Any) -> str | None:
    """Who a private entry belongs to: the ``Authorization`` header (digested), else the
    handshake-era session (its ``Mcp-Session-Id``); None when the request has neither. With
    ``Server(auth=...)`` it is the verified principal (issuer, subject, client)."""
    principal = getattr(ctx, "principal", None)
    if principal is not None:
        return "p:" + hashlib.sha256(principal.key.encode()).hexdigest()[:32]
    headers = getattr(ctx, "headers", None)
    raw = getattr(headers, "raw", None)
    if raw:
        for name, value in raw:
            if name == b"authorization":
                return "a:" + hashlib.sha256(value).hexdigest()[:32]
    session = getattr(ctx, "session", None)
    session_id = getattr(session, "id", None)
    return None if session_id is None else "s:" + session_id
