"""The native HTTP/1.1 client link: :class:`~millimcp.client.native.link.NativeLink` over a
pool of :class:`asyncio.Protocol` connections parsed by httptools (no aiohttp).

``connection`` is one keep-alive connection, ``pool`` the connections to one origin, ``link``
the Streamable HTTP rules on top (the same as :mod:`millimcp.client.http_link`'s).
"""

from __future__ import annotations

from millimcp.client.native.link import NativeLink

__all__ = ["NativeLink"]
