"""A :class:`~millimcp.client.Client` connected to a :class:`~millimcp.server.Server` in
memory, for tests: no socket, no subprocess.

::

    async with connect(server) as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})

The server runs its lifespan (:meth:`Server.running`) around the connection, and its ASGI
app (:meth:`Server.asgi`, built once) is called in-process by an
:class:`~millimcp.client.asgi_link.AsgiLink`: each request goes through the server's real
HTTP front (headers, sessions, SSE streams, cancellation by disconnect, raw tensors) as it
would over a socket. What it does not exercise is the network itself: connection pooling,
compression, TLS, a proxy; use :meth:`Client.over_http` against a served app for those.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Final, Literal, Unpack

from millimcp.client import Client
from millimcp.client.asgi_link import AsgiLink
from millimcp.client.options import ClientOptions
from millimcp.client.tensors import available as tensors_available

if TYPE_CHECKING:
    from millimcp.server import Server

__all__ = ["connect"]

_CONNECTIONS: Final = itertools.count(1)


@contextlib.asynccontextmanager
async def connect(
    server: Server,
    *,
    era: Literal["modern", "handshake"] | None = None,
    headers: Mapping[str, str] | None = None,
    **options: Unpack[ClientOptions],
) -> AsyncIterator[Client]:
    """An open :class:`~millimcp.client.Client` wired to ``server`` in memory.

    ``era``: ``"modern"`` or ``"handshake"`` forces one (as ``Client.over_http(...,
    era=...)``); None lets the client find the era as it would over HTTP (a millimcp server
    answers ``server/discover``: modern). ``headers`` go with every request
    (``Authorization``...). ``options`` are the client's (``timeout``, ``retry``,
    ``limits``, the handlers, ``client_info``, ``tensors``, ``tensor_type``).

    The server's lifespan runs from before the client opens until after it closed; the
    client is closed (its session deleted, its streams ended) on exit.
    """
    tensors = options.get("tensors", True) and tensors_available()
    async with server.running():
        link = AsgiLink(server.asgi(), headers=headers, tensors=tensors)
        key = f"memory:{id(server):x}#{next(_CONNECTIONS)}"  # nothing to remember across runs
        async with Client(link, key=key, era=era or "auto", **options) as client:
            yield client
