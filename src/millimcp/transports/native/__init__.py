"""The native HTTP/1.1 front: ``asyncio.Protocol`` + ``httptools`` (llhttp), no ASGI layer.

It serves the same endpoint as the ASGI app (:class:`~millimcp.transports.http.StreamableHTTPApp`,
whose checks and settings it reuses) and hands each request straight to the session layer's
message handler. Modules: :mod:`.wire` (response bytes), :mod:`.connection` (one connection:
parsing, pipelining, deadlines, backpressure, lingering close), :mod:`.exchange` (how a handler
answers), :mod:`.front` (judging and answering a request), :mod:`.server` (listening, TLS,
graceful shutdown, workers). Needs the ``serve`` extra (httptools).
"""

from millimcp.transports.native.server import NativeServer, run_native, serve_native, tls_context

__all__ = ["NativeServer", "run_native", "serve_native", "tls_context"]
