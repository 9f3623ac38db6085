"""Running an ASGI app under an HTTP server: uvicorn (default), granian, or the native front.

Binds 127.0.0.1 unless told otherwise; keep-alive on; TCP_NODELAY (both servers set it on
accepted sockets); access logs off. Why uvicorn is the default: docs/serving.md.

TLS (``certfile`` + ``keyfile``, PEM) works with both. Session resumption is on in both, so
a client that reconnects skips the full handshake (SEEDS S2.3): uvicorn's OpenSSL context
issues TLS 1.3 session tickets (OpenSSL's default, never turned off here), granian's rustls
keeps a server-side session cache and issues tickets for it. HTTP/2 needs granian: over TLS it
is chosen by ALPN (``h2``, else ``http/1.1``), in cleartext a client may speak h2c with prior
knowledge on the same port. uvicorn speaks HTTP/1.1 only.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from millimcp.errors import ConfigurationError

__all__ = ["run_app"]


def run_app(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    http: str = "uvicorn",
    log_level: str = "warning",
    keepalive_s: int = 60,
    certfile: str | None = None,
    keyfile: str | None = None,
) -> None:
    """Serve an ASGI app (or an import string, needed for workers > 1 and granian).

    ``certfile`` and ``keyfile`` (PEM; granian wants the key in PKCS#8) turn on TLS.
    ``http="native"`` serves a millimcp endpoint app (``server.asgi()``) on the native
    HTTP/1.1 front (:mod:`millimcp.transports.native`): ``workers`` forked processes share
    the port with ``SO_REUSEPORT``; the limits and timeouts are the app's ``HttpConfig``.
    """
    if (certfile is None) != (keyfile is None):
        raise ConfigurationError("TLS needs both a certificate file and a key file")
    if http == "native":
        from millimcp.transports.native import run_native

        if isinstance(app, str):
            module, _, attribute = app.partition(":")
            app = getattr(importlib.import_module(module), attribute or "app")
        code = run_native(
            app, host=host, port=port, workers=workers, certfile=certfile, keyfile=keyfile
        )
        if code:
            raise SystemExit(code)
    elif http == "uvicorn":
        try:
            import uvicorn
        except ImportError:
            raise ConfigurationError(
                "uvicorn is not installed: pip install 'millimcp[serve]'"
            ) from None
        uvicorn.run(
            app,
            host=host,
            port=port,
            workers=workers if isinstance(app, str) else None,
            loop="uvloop" if _has("uvloop") else "asyncio",
            http="httptools" if _has("httptools") else "h11",
            access_log=False,
            log_level=log_level,
            timeout_keep_alive=keepalive_s,
            lifespan="on",
            ssl_certfile=certfile,
            ssl_keyfile=keyfile,
        )
    elif http == "granian":
        try:
            from granian import Granian
            from granian.constants import HTTPModes, Interfaces
            from granian.log import LogLevels
        except ImportError:
            raise ConfigurationError(
                "granian is not installed: pip install 'millimcp[granian]'"
            ) from None
        if not isinstance(app, str):
            raise ConfigurationError("granian needs an import string (module:attribute)")
        Granian(
            app,
            address=host,
            port=port,
            workers=workers,
            interface=Interfaces.ASGI,
            http=HTTPModes.auto,  # HTTP/1.1 and HTTP/2 (ALPN over TLS, h2c prior knowledge)
            log_level=LogLevels(log_level) if log_level in _GRANIAN_LEVELS else LogLevels.warning,
            log_access=False,
            ssl_cert=None if certfile is None else Path(certfile),
            ssl_key=None if keyfile is None else Path(keyfile),
        ).serve()
    else:
        raise ConfigurationError(f"unknown HTTP server {http!r}: use uvicorn, granian or native")


_GRANIAN_LEVELS = frozenset({"critical", "error", "warning", "warn", "info", "debug"})


def _has(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
