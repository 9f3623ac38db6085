"""Which era a request belongs to, and the checks that era makes (sans-I/O).

The 2026-07-28 revision is stateless: every request carries its version, the client's
capabilities and identity in ``_meta`` (and, over HTTP, the version in
``MCP-Protocol-Version``). The handshake era (2025-11-25 and earlier) opens a session with
``initialize``; over HTTP the session has an id (``Mcp-Session-Id``), over stdio it is the
connection. One endpoint serves both, and this module is the one place that tells them apart:

============================  ===========================================================
HTTP POST                     era
============================  ===========================================================
``Mcp-Session-Id`` present    handshake (a request within a session)
``_meta`` names a version,    modern
or the header is a modern
version
anything else                 handshake (``initialize``, or a sessionless request that the
                              handshake front answers or refuses)
============================  ===========================================================

==============================================  ==========================================
a line (stdio)                                  era
==============================================  ==========================================
``initialize``, or a method only the handshake  handshake (``ping`` is answered before
era has (``ping``, ``logging/setLevel``...)     ``initialize``, the rest needs it)
``_meta`` names a version                       modern
anything else                                   handshake
==============================================  ==========================================

After the era come its checks: :func:`check_modern` for a modern request (over HTTP with its
headers), :func:`negotiate_handshake` and :func:`check_handshake_version` for the handshake
era.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias, overload

from millimcp.errors import InvalidParams, MethodNotFound, UnsupportedProtocolVersion
from millimcp.protocol.headers import McpHeaders
from millimcp.protocol.methods import LEGACY_ONLY, METHODS
from millimcp.protocol.types import RequestMeta
from millimcp.protocol.versions import LEGACY_VERSIONS, MODERN_VERSIONS

__all__ = [
    "HANDSHAKE",
    "MODERN",
    "Era",
    "check_handshake_version",
    "check_modern",
    "classify_http",
    "classify_line",
    "is_handshake_version",
    "negotiate_handshake",
    "without_result_type",
]

Era: TypeAlias = Literal["modern", "handshake"]
MODERN: Final = "modern"
HANDSHAKE: Final = "handshake"

# Tuples, not sets: the versions compared are strings fresh from a decoder, and comparing
# them with two or three short constants costs less than hashing them.
_MODERN: Final = MODERN_VERSIONS
_LEGACY: Final = LEGACY_VERSIONS


def classify_http(
    meta_version: str | None, header_version: str | None, session_id: str | None = None
) -> Era:
    """The era of an HTTP POST: ``_meta``'s version, ``MCP-Protocol-Version``, the session."""
    if session_id is not None:
        return HANDSHAKE
    if meta_version is not None or header_version in _MODERN:
        return MODERN
    return HANDSHAKE


def classify_line(method: str, meta_version: str | None) -> Era:
    """The era of a request on a line-framed connection (stdio)."""
    if meta_version is None or METHODS[method].era == "legacy":
        return HANDSHAKE
    return MODERN


@overload
def check_modern(
    method: str,
    meta: RequestMeta | None,
    name: str | None = None,
    headers: McpHeaders | None = None,
    classify: Literal[False] = False,
) -> str: ...
@overload
def check_modern(
    method: str,
    meta: RequestMeta | None,
    name: str | None,
    headers: McpHeaders | None,
    classify: bool,
) -> str | None: ...
def check_modern(
    method: str,
    meta: RequestMeta | None,
    name: str | None = None,
    headers: McpHeaders | None = None,
    classify: bool = False,
) -> str | None:
    """A modern request's checks, in the spec's order; returns its version.

    ``classify`` (an HTTP POST without a session, ``headers`` given): first decide the era as
    :func:`classify_http` does, and return None for a handshake-era request (no checks): one
    call on the hot path for both.

    1. the method is in the era (-32601, HTTP 404);
    2. over HTTP (``headers``): ``Mcp-Method`` agrees with the body, then ``Mcp-Name`` with
       ``name`` (the params' name or URI, for the methods that have one) (-32020);
    3. ``_meta`` carries the version and the client's capabilities (-32602);
    4. over HTTP: ``MCP-Protocol-Version`` agrees with ``_meta`` (-32020);
    5. the version is served (-32022).
    """
    if (
        classify
        and (meta is None or meta.protocol_version is None)
        and (headers is None or headers.protocol_version not in _MODERN)
    ):
        return None
    if method in LEGACY_ONLY:
        raise MethodNotFound(f"Method not found: {method}")
    if headers is not None:
        if headers.method != method:
            headers.check_method(method)
        if name is not None and headers.name != name:
            headers.check_name(name)
    if meta is None or meta.protocol_version is None or meta.client_capabilities is None:
        raise InvalidParams(
            "Invalid params: _meta must carry io.modelcontextprotocol/protocolVersion "
            "and io.modelcontextprotocol/clientCapabilities"
        )
    version = meta.protocol_version
    if headers is not None and headers.protocol_version != version:
        headers.check_version(version)
    if version not in _MODERN:
        raise UnsupportedProtocolVersion(
            "Unsupported protocol version",
            {"supported": list(MODERN_VERSIONS), "requested": version},
        )
    return version


def negotiate_handshake(requested: str, enabled: bool = True) -> str:
    """The version ``initialize`` agrees on: the client's if served, else our latest.

    ``enabled=False`` (a server of the stateless revisions only) refuses with -32022.
    """
    if not enabled:
        raise UnsupportedProtocolVersion(
            "Unsupported protocol version: this server speaks only the stateless "
            f"revisions {', '.join(MODERN_VERSIONS)} (send server/discover)",
            {"supported": list(MODERN_VERSIONS), "requested": requested},
        )
    return requested if requested in _LEGACY else LEGACY_VERSIONS[0]


def check_handshake_version(version: str | None) -> None:
    """A handshake-era request's ``MCP-Protocol-Version``, when it sends one, is one of ours."""
    if version is not None and version not in _LEGACY:
        raise UnsupportedProtocolVersion(
            "Bad Request: unsupported MCP-Protocol-Version",
            {"supported": list(LEGACY_VERSIONS), "requested": version},
        )


def is_handshake_version(version: str | None) -> bool:
    return version in _LEGACY


_RESULT_TYPE: Final = b'"result":{"resultType":"complete",'


def without_result_type(data: bytes) -> bytes:
    """A reply for a handshake-era client, which does not know ``resultType``.

    ``resultType`` is the results' struct tag, so msgspec always writes it first: it is found
    within the first bytes of an encoded reply or not at all.
    """
    at = data.find(_RESULT_TYPE, 0, 256)
    if at < 0:
        return data
    return data[:at] + b'"result":{' + data[at + len(_RESULT_TYPE) :]
