"""``Client.over_http(auth=...)`` builds the native link by default, which then drives the
authorization flow (the aiohttp link on request)."""

from __future__ import annotations

from millimcp import Client
from millimcp.auth import BearerToken
from millimcp.client.http_link import HttpLink
from millimcp.client.native import NativeLink


def test_auth_rides_the_native_link_by_default_and_aiohttp_on_request() -> None:
    native = Client.over_http("http://127.0.0.1:9/mcp", auth=BearerToken("t"))
    link = native._core.link
    assert isinstance(link, NativeLink)
    assert link.auth is not None
    chosen = Client.over_http("http://127.0.0.1:9/mcp", auth=BearerToken("t"), http="aiohttp")
    assert isinstance(chosen._core.link, HttpLink)
    assert chosen._core.link.auth is not None
