"""What the client flow asks its driver to do, and what the driver answers.

The flow (:mod:`millimcp.auth.flow`) is a generator: it yields one step at a time and is
sent the step's answer. It does no I/O, so any link can drive it:

============================  ====================================================
yielded                       sent back
============================  ====================================================
:class:`HttpRequest`          :class:`HttpResponse` (redirects not followed)
:class:`UserRedirect`         the URL the authorization server redirected back to
:class:`Load`                 the stored :class:`~millimcp.auth.storage.Credentials`
:class:`Save`                 None
============================  ====================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlencode

from millimcp.auth.storage import Credentials

__all__ = ["HttpRequest", "HttpResponse", "Load", "Save", "Step", "UserRedirect"]


class HttpRequest(NamedTuple):
    method: str
    url: str
    headers: Mapping[str, str] = {}
    body: bytes | None = None

    @classmethod
    def form(
        cls, url: str, fields: Mapping[str, str | None], headers: Mapping[str, str] = {}
    ) -> HttpRequest:
        """A POST of ``application/x-www-form-urlencoded`` fields (None ones left out)."""
        body = urlencode({k: v for k, v in fields.items() if v is not None}).encode()
        return cls(
            "POST",
            url,
            {
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
                **headers,
            },
            body,
        )

    @classmethod
    def json(cls, url: str, body: bytes) -> HttpRequest:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        return cls("POST", url, headers, body)

    @classmethod
    def get(cls, url: str) -> HttpRequest:
        return cls("GET", url, {"Accept": "application/json"})


class HttpResponse(NamedTuple):
    status: int
    headers: Mapping[str, str]
    body: bytes


class UserRedirect(NamedTuple):
    """Send the user agent to ``url``; answer with the callback URL it came back to."""

    url: str
    redirect_uri: str


class Load(NamedTuple):
    resource: str


class Save(NamedTuple):
    resource: str
    credentials: Credentials | None


Step = HttpRequest | UserRedirect | Load | Save
