"""Which HTTP link ``Client.over_http`` builds: ``http="native"`` or ``http="aiohttp"``.

- ``native`` (the default, :class:`~millimcp.client.native.NativeLink`): HTTP/1.1 on
  :class:`asyncio.Protocol` and httptools. Needs ``httptools`` (the ``client`` extra).
- ``aiohttp`` (:class:`~millimcp.client.http_link.HttpLink`): the same rules over an
  aiohttp pool. Kept for what aiohttp has and the native link has not: a place to add HTTP
  proxies (``trust_env``/``proxy=``), HTTP auth helpers and cookie jars, and uvloop-specific
  TLS paths the native link's session reuse does not cover (the native link resumes TLS
  sessions only on the standard asyncio loop).

Both links drive the authorization flow of ``auth=`` (:mod:`millimcp.client.authorizer`);
the flow's own requests to authorization servers (metadata, registration, tokens) go through
the authorizer's aiohttp session, off the calls' path.

Both links are selected by name, and both raise :class:`~millimcp.errors.MissingExtra` when
their package is not installed. ``DEFAULT`` is what ``http=None`` means.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from millimcp.client.link import Link
from millimcp.errors import MissingExtra

__all__ = ["DEFAULT", "HttpKind", "http_link"]

HttpKind = Literal["native", "aiohttp"]
DEFAULT: Final[HttpKind] = "native"

_PACKAGES: Final = {"native": "httptools", "aiohttp": "aiohttp"}


def http_link(http: HttpKind | None, url: str, **options: Any) -> Link:
    """The link of kind ``http`` (None: :data:`DEFAULT`) to ``url``."""
    kind = DEFAULT if http is None else http
    if kind not in _PACKAGES:
        raise ValueError(f"http must be 'native' or 'aiohttp', not {http!r}")
    try:
        if kind == "native":
            from millimcp.client.native import NativeLink

            return NativeLink(url, **options)
        from millimcp.client.http_link import HttpLink

        return HttpLink(url, **options)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] != _PACKAGES[kind]:
            raise
        raise MissingExtra("client", "Client.over_http", _PACKAGES[kind]) from None
