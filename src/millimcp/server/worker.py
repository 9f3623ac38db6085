"""One worker of a :class:`~millimcp.transports.supervisor.Supervisor`.

Run as ``python -m millimcp.server.worker``. It reads what to serve from the environment
(:data:`~millimcp.transports.supervisor.SPEC_ENV`, JSON): ``target`` (``module:attribute``
of a millimcp ``Server``, served at ``path`` with the ``graceful_timeout_s`` and
``health_path`` given) or ``app`` (an ASGI app's import string), ``front`` (``uvicorn`` or
``native``; none: :func:`~millimcp.server.serve.front_for` picks), ``certfile``/``keyfile``,
``log_level``; serves it on the inherited listening
socket, writes one byte to the ready pipe once it listens, and drains and exits 0 on
SIGTERM, or when the supervisor's lifeline ends.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
from typing import Any

from millimcp.errors import ConfigurationError
from millimcp.transports.supervisor import (
    LIFELINE_ENV,
    LISTEN_FD_ENV,
    READY_ENV,
    SPEC_ENV,
    ready_signal,
)

__all__ = ["build_app", "main"]


def build_app(spec: dict[str, Any]) -> Any:
    """The ASGI app ``spec`` names (a fresh import: a restart serves the code as it is now)."""
    from millimcp.server.serve import load_target
    from millimcp.transports.http import HttpConfig

    target = spec.get("target")
    if target is not None:
        server = load_target(target)
        config = HttpConfig(
            path=spec.get("path", "/mcp"),
            graceful_timeout_s=spec.get("graceful_timeout_s", 30.0),
            health_path=spec.get("health_path"),
        )
        return server.asgi(http=config)
    module, _, attribute = str(spec["app"]).partition(":")
    sys.path.insert(0, os.getcwd())
    return getattr(importlib.import_module(module), attribute or "app")


def main() -> int:
    spec = json.loads(os.environ[SPEC_ENV])
    sock = socket.socket(fileno=int(os.environ[LISTEN_FD_ENV]))
    ready = ready_signal(int(os.environ[READY_ENV]))
    lifeline = int(os.environ[LIFELINE_ENV])
    try:
        app = build_app(spec)
    except ConfigurationError as exc:  # one line, as the CLI says it (not in each traceback)
        print(f"millimcp: {exc}", file=sys.stderr, flush=True)
        return 2
    certfile, keyfile = spec.get("certfile"), spec.get("keyfile")
    from millimcp.server.serve import front_for

    try:
        front = front_for(app, spec.get("front"))
    except ConfigurationError as exc:
        print(f"millimcp: {exc}", file=sys.stderr, flush=True)
        return 2
    if front == "native":
        from millimcp.transports.native.server import run_one, tls_context

        context = None if certfile is None else tls_context(certfile, keyfile)
        return run_one(app, sock=sock, ssl_context=context, on_ready=ready, lifeline=lifeline)
    from millimcp.server.serve import serve_uvicorn

    serve_uvicorn(
        app,
        sock=sock,
        log_level=spec.get("log_level", "warning"),
        keepalive_s=spec.get("keepalive_s"),
        graceful_timeout_s=spec.get("graceful_timeout_s"),
        max_connections=spec.get("max_connections"),
        certfile=certfile,
        keyfile=keyfile,
        on_ready=ready,
        lifeline=lifeline,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
