"""The Streamable HTTP request-metadata headers, checked against the body (sans-I/O).

``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` mirror body fields; a value may
use the ``=?base64?...?=`` sentinel. Any disagreement is a :class:`HeaderMismatch` (-32020,
HTTP 400).
"""

from __future__ import annotations

import base64
import binascii
import re
from decimal import Decimal, InvalidOperation
from typing import Final

import msgspec

from millimcp.errors import HeaderMismatch

__all__ = ["McpHeaders", "decode_header_value", "encode_header_value"]

_SENTINEL_PREFIX: Final = "=?base64?"
_SENTINEL_SUFFIX: Final = "?="
_PLAIN_SAFE: Final = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?\Z")
_VISIBLE: Final = re.compile(r"[\x20-\x7e\t]*\Z")


def decode_header_value(value: str) -> str:
    """Decode a sentinel-encoded header value; plain values come back unchanged."""
    if value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX):
        encoded = value[len(_SENTINEL_PREFIX) : -len(_SENTINEL_SUFFIX)]
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise HeaderMismatch("Header mismatch: invalid base64 header value") from None
    if not _VISIBLE.match(value):
        raise HeaderMismatch("Header mismatch: header value contains invalid characters")
    return value


def encode_header_value(value: str) -> str:
    """Encode a value for a header: plain when safe, else the base64 sentinel."""
    if _PLAIN_SAFE.match(value) and not (
        value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX)
    ):
        return value
    return _SENTINEL_PREFIX + base64.b64encode(value.encode()).decode("ascii") + _SENTINEL_SUFFIX


class McpHeaders(msgspec.Struct, gc=False):
    """The MCP headers of one HTTP request, as the transport found them (latin-1 str).

    A struct, not a plain class: one is built per request and msgspec builds it in C.
    """

    protocol_version: str | None = None
    method: str | None = None
    name: str | None = None
    raw: list[tuple[bytes, bytes]] | None = None
    """All request headers, scanned for ``Mcp-Param-*`` only when a tool declares one."""
    session_id: str | None = None
    """``Mcp-Session-Id``: set only by handshake-era clients, after ``initialize``."""
    _params: dict[str, str] | None = None

    @property
    def params(self) -> dict[str, str]:
        """``Mcp-Param-*`` values keyed by lower-cased name suffix (read on first use)."""
        if self._params is None:
            self._params = {
                name[10:].decode("latin-1").lower(): value.decode("latin-1")
                for name, value in self.raw or ()
                if name[:10].lower() == b"mcp-param-"
            }
        return self._params

    def check_method(self, method: str) -> None:
        if self.method is None:
            raise HeaderMismatch("Header mismatch: the Mcp-Method header is required")
        if self.method.strip(" \t") != method:
            raise HeaderMismatch(
                f"Header mismatch: Mcp-Method header value {self.method!r} "
                f"does not match body value {method!r}"
            )

    def check_version(self, version: str) -> None:
        if self.protocol_version is None:
            raise HeaderMismatch("Header mismatch: the MCP-Protocol-Version header is required")
        if self.protocol_version.strip(" \t") != version:
            raise HeaderMismatch(
                f"Header mismatch: MCP-Protocol-Version header value {self.protocol_version!r} "
                f"does not match body value {version!r}"
            )

    def check_name(self, name: str) -> None:
        if self.name is None:
            raise HeaderMismatch("Header mismatch: the Mcp-Name header is required")
        sent = self.name.strip(" \t")
        if sent != name and decode_header_value(sent) != name:
            raise HeaderMismatch(
                f"Header mismatch: Mcp-Name header value {self.name!r} "
                f"does not match body value {name!r}"
            )

    def check_param(self, header: str, value: object) -> None:
        """Check one ``x-mcp-header`` parameter; ``value`` None means absent from the body."""
        sent = self.params.get(header.lower())
        if value is None:
            return
        if sent is None:
            raise HeaderMismatch(f"Header mismatch: the Mcp-Param-{header} header is required")
        if not _same_param(decode_header_value(sent), value):
            raise HeaderMismatch(
                f"Header mismatch: Mcp-Param-{header} header value does not match the body"
            )


def _same_param(sent: str, value: object) -> bool:
    if isinstance(value, bool):
        return sent == ("true" if value else "false")
    if isinstance(value, int):
        # Compare numerically and exactly: "42.0" equals 42, 2**53 + 1 is not 2**53.
        try:
            number = Decimal(sent.strip())
        except InvalidOperation:
            return False
        return number.is_finite() and number == value
    return sent == str(value)
