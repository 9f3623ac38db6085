"""uvicorn, shut down on purpose: SIGTERM or SIGINT drains the app, then uvicorn stops.

What :class:`GracefulServer` adds to uvicorn's own shutdown (stop accepting, let requests
in progress finish within ``timeout_graceful_shutdown``, then the lifespan's end):

- first, the app's ``drain()`` (:meth:`~millimcp.transports.http.StreamableHTTPApp.drain`):
  readiness turns 503, new requests on open connections get 503 with ``Retry-After``,
  ``subscriptions/listen`` and handshake-era GET streams end with their clean close, so
  that they do not hold the shutdown to its timeout;
- then the process exits with status 0: uvicorn re-raises the signal it caught once it is
  done (the process would die of it, status -15); a shutdown that went as planned is not
  a failure.

Imported only where uvicorn runs (it imports uvicorn). Each worker of ``--workers N`` runs
one too (uvicorn's supervisor starts ``server.run`` in each).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from types import FrameType
from typing import Any

import uvicorn

__all__ = ["GracefulServer", "drain_target"]


def drain_target(app: Any) -> Any:
    """The app inside uvicorn's middleware wrappers that has a ``drain()``, or None."""
    for _ in range(8):
        if app is None or callable(getattr(app, "drain", None)):
            return app
        app = getattr(app, "app", None)
    return None


class GracefulServer(uvicorn.Server):
    """A :class:`uvicorn.Server` that drains its app when told to stop, and exits 0."""

    banner: str | None = None
    """Printed to stderr once the server listens (``millimcp serve``'s start line)."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.banner is not None:
            print(self.banner, file=sys.stderr, flush=True)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            target = drain_target(getattr(self.config, "loaded_app", None))
            if target is not None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    target.drain()
                else:
                    loop.call_soon_threadsafe(target.drain)
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        with contextlib.suppress(AttributeError):
            self._captured_signals.clear()  # done on purpose: do not die of the signal
