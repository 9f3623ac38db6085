"""The URLs of MCP authorization: canonical resource identifiers and the discovery order.

- :func:`canonical_resource`: the RFC 8707 resource of an MCP server URL (lower-case scheme
  and host, no fragment, no query, no trailing slash but for the root).
- :func:`resource_allowed`: may a protected resource document's ``resource`` stand for this
  server (same origin, its path a prefix of the server's, segment-wise)?
- :func:`prm_urls`: the RFC 9728 well-known URLs to try when the challenge names none
  (path-inserted, then root).
- :func:`as_metadata_urls`: the three URL forms of RFC 8414 / OpenID Connect Discovery, in
  the spec's order.
- :func:`check_transport`: ``https`` everywhere, ``http`` only for loopback hosts.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit, urlunsplit

from millimcp.errors import AuthorizationFailed

__all__ = [
    "as_metadata_urls",
    "canonical_resource",
    "check_transport",
    "is_loopback",
    "prm_urls",
    "resource_allowed",
    "same_issuer",
]

_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
PRM_WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"


def is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in _LOOPBACK or host.startswith("127.") or host.endswith(".localhost")


def check_transport(url: str, what: str) -> None:
    """Refuse (:class:`~millimcp.errors.AuthorizationFailed`) a URL that is not https,
    unless it is http on a loopback host."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "https" or (scheme == "http" and is_loopback(url)):
        return
    raise AuthorizationFailed(f"{what} {url!r} is not https (http only for loopback hosts)")


def canonical_resource(url: str) -> str:
    """The canonical URI of an MCP server (MCP authorization §Canonical Server URI)."""
    parts = urlsplit(url)
    scheme, netloc = parts.scheme.lower(), parts.netloc.lower()
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, netloc, path, "", ""))


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    return parts.scheme.lower(), f"{(parts.hostname or '').lower()}:{port}"


def resource_allowed(server_url: str, resource: str) -> bool:
    """True when ``resource`` (from protected resource metadata) covers ``server_url``."""
    if _origin(server_url) != _origin(resource):
        return False
    want = [s for s in urlsplit(server_url).path.split("/") if s]
    have = [s for s in urlsplit(resource).path.split("/") if s]
    return want[: len(have)] == have


def prm_urls(server_url: str) -> list[str]:
    """Well-known protected resource metadata URLs of a server: path-inserted, then root."""
    parts = urlsplit(server_url)
    path = parts.path.rstrip("/")
    urls = []
    if path:
        urls.append(urlunsplit((parts.scheme, parts.netloc, PRM_WELL_KNOWN + path, "", "")))
    urls.append(urlunsplit((parts.scheme, parts.netloc, PRM_WELL_KNOWN, "", "")))
    return urls


def as_metadata_urls(issuer: str) -> list[str]:
    """Authorization server metadata URLs of an issuer, in the spec's order."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def at(p: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, p, "", ""))

    if path:
        return [
            at("/.well-known/oauth-authorization-server" + path),
            at("/.well-known/openid-configuration" + path),
            at(path + "/.well-known/openid-configuration"),
        ]
    return [at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")]


def same_issuer(asked: str, document: str) -> bool:
    """RFC 8414 §3.3: the metadata's ``issuer`` is the one its URL was built from. Exact,
    except that a pathless issuer may carry one trailing ``/`` on either side (what URL
    libraries such as pydantic's make of ``https://as.example.com``)."""
    if asked == document:
        return True
    if urlsplit(asked).path not in ("", "/") or urlsplit(document).path not in ("", "/"):
        return False
    return asked.rstrip("/") == document.rstrip("/") and asked.count("/") <= 3
