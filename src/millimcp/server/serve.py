"""Running an ASGI app under an HTTP server: uvicorn (default) or granian.

Binds 127.0.0.1 unless told otherwise; keep-alive on; TCP_NODELAY (both servers set it on
accepted sockets); access logs off. Why uvicorn is the default: docs/serving.md.
"""

from __future__ import annotations

import importlib
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
) -> None:
    """Serve an ASGI app (or an import string, needed for workers > 1)."""
    if http == "uvicorn":
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
        )
    elif http == "granian":
        try:
            from granian import Granian
            from granian.constants import Interfaces
        except ImportError:
            raise ConfigurationError(
                "granian is not installed: pip install 'millimcp[granian]'"
            ) from None
        if not isinstance(app, str):
            raise ConfigurationError("granian needs an import string (module:attribute)")
        Granian(app, address=host, port=port, workers=workers, interface=Interfaces.ASGI).serve()
    else:
        raise ConfigurationError(f"unknown HTTP server {http!r}: use uvicorn or granian")


def _has(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
