"""How a server-side verifier fetches a document (JWKS, authorization server metadata,
introspection): an async callable, by default the standard library in a worker thread (no
HTTP client dependency; a verifier fetches rarely). Capped in size and time."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

__all__ = ["Fetch", "urllib_fetch"]

Fetch = Callable[[str, bytes | None, Mapping[str, str]], Awaitable[tuple[int, bytes]]]
"""``await fetch(url, body, headers) -> (status, body)``: GET without a body, else POST."""

_MAX_BYTES: Final = 1024 * 1024
_TIMEOUT_S: Final = 10.0


def _blocking(url: str, body: bytes | None, headers: Mapping[str, str]) -> tuple[int, bytes]:
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"not an http(s) URL: {url!r}")
    request = urllib.request.Request(url, data=body, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
            return response.status, response.read(_MAX_BYTES)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(_MAX_BYTES)


async def urllib_fetch(
    url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
) -> tuple[int, bytes]:
    return await asyncio.to_thread(_blocking, url, body, headers or {"Accept": "application/json"})
