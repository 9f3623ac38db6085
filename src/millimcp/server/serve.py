"""Running an ASGI app under an HTTP server: the native front (default), uvicorn or granian.

Binds 127.0.0.1 unless told otherwise; keep-alive on; TCP_NODELAY (every front sets it on
accepted sockets); access logs off. The native front (:mod:`millimcp.transports.native`) is the
default for a millimcp endpoint app (``server.asgi()``); any other ASGI app, and an import
string, goes to uvicorn unless ``http=`` says otherwise. ``MILLIMCP_HTTP_FRONT`` (native,
uvicorn or granian) changes the default without touching the code that serves (``millimcp
serve``, ``run_http()``, a compat server's ``run()``); ``http=``/``--http`` wins over it. Why:
docs/serving.md.

TLS (``certfile`` + ``keyfile``, PEM) works with both. Session resumption is on in both, so
a client that reconnects skips the full handshake (SEEDS S2.3): uvicorn's OpenSSL context
issues TLS 1.3 session tickets (OpenSSL's default, never turned off here), granian's rustls
keeps a server-side session cache and issues tickets for it. HTTP/2 needs granian: over TLS it
is chosen by ALPN (``h2``, else ``http/1.1``), in cleartext a client may speak h2c with prior
knowledge on the same port. uvicorn speaks HTTP/1.1 only.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from millimcp.errors import ConfigurationError

if TYPE_CHECKING:
    from millimcp.transports.http import HttpConfig

__all__ = [
    "FRONTS",
    "FRONT_ENV",
    "default_front",
    "front_for",
    "load_target",
    "run_app",
    "run_workers",
    "serve_uvicorn",
]

FRONTS = ("native", "uvicorn", "granian")
"""The HTTP fronts ``run_app`` (and ``millimcp serve --http``) knows, the default first."""
FRONT_ENV = "MILLIMCP_HTTP_FRONT"
"""The environment variable that names the default front (unset or empty: native)."""


def default_front() -> str:
    """The front to use when none is given: ``$MILLIMCP_HTTP_FRONT``, else ``native``."""
    front = os.environ.get(FRONT_ENV, "").strip().lower() or FRONTS[0]
    if front not in FRONTS:
        raise ConfigurationError(
            f"{FRONT_ENV}={os.environ[FRONT_ENV]!r} is not an HTTP front: use " + ", ".join(FRONTS)
        )
    return front


def front_for(app: Any, http: str | None) -> str:
    """The front that serves ``app``: ``http`` when given; else :func:`default_front`, except
    that the native front serves only a millimcp endpoint app (``server.asgi()``), so any
    other ASGI app (or an import string) goes to uvicorn by default."""
    if http is not None:
        return http
    front = default_front()
    if front == "native" and not _is_endpoint(app):
        return "uvicorn"
    return front


def load_target(spec: str) -> Any:
    """Import ``module:attribute`` (attribute defaults to ``server``)."""
    module_name, _, attribute = spec.partition(":")
    sys.path.insert(0, os.getcwd())
    if not module_name:
        raise ConfigurationError(f"{spec!r} is not module:attribute")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the module may fail in any way while it runs
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}") from exc
    try:
        return getattr(module, attribute or "server")
    except AttributeError:
        raise ConfigurationError(f"{module_name!r} has no attribute {attribute!r}") from None


def run_app(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    http: str | None = None,
    log_level: str = "warning",
    keepalive_s: float | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    graceful_timeout_s: float | None = None,
    max_connections: int | None = None,
    banner: str | None = None,
) -> None:
    """Serve an ASGI app (or an import string, needed for workers > 1 and granian).

    ``certfile`` and ``keyfile`` (PEM; granian wants the key in PKCS#8) turn on TLS.
    ``http`` is ``"native"``, ``"uvicorn"`` or ``"granian"``; ``None`` picks
    :func:`front_for`: the native HTTP/1.1 front (:mod:`millimcp.transports.native`) for a
    millimcp endpoint app (``server.asgi()``; its limits and timeouts are the app's
    ``HttpConfig``), uvicorn for any other app, unless ``MILLIMCP_HTTP_FRONT`` says otherwise.
    ``workers > 1`` (uvicorn: with an import string) runs a
    :class:`~millimcp.transports.supervisor.Supervisor`: the workers share one listening socket,
    SIGHUP restarts them one by one, SIGTERM/SIGINT drains them all.
    ``keepalive_s``, ``graceful_timeout_s`` and ``max_connections`` default to the app's
    :class:`~millimcp.transports.http.HttpConfig` (``keepalive_timeout_s``...; the class's
    defaults for an import string). Under uvicorn, SIGTERM and SIGINT drain the app first
    (:mod:`millimcp.server.graceful`) and the process exits 0. ``banner`` is printed to
    stderr once the server listens. A port that cannot be bound raises
    :class:`~millimcp.errors.ConfigurationError` (one line, no traceback, in the CLI).
    """
    limits = _limits(app)
    keepalive = limits.keepalive_timeout_s if keepalive_s is None else keepalive_s
    grace = limits.graceful_timeout_s if graceful_timeout_s is None else graceful_timeout_s
    connections = limits.max_connections if max_connections is None else max_connections
    if (certfile is None) != (keyfile is None):
        raise ConfigurationError("TLS needs both a certificate file and a key file")
    http = front_for(app, http)
    if http == "native":
        from millimcp.transports.native import run_native

        if isinstance(app, str):
            module, _, attribute = app.partition(":")
            app = getattr(importlib.import_module(module), attribute or "app")
        code = run_native(
            app,
            host=host,
            port=port,
            workers=workers,
            certfile=certfile,
            keyfile=keyfile,
            banner=banner,
        )
        if code:
            raise SystemExit(code)
    elif http == "uvicorn":
        if certfile is not None and keyfile is not None:
            _check_tls(certfile, keyfile)  # in one line here, not in uvicorn's traceback
        if workers > 1 and isinstance(app, str):
            spec = {
                "app": app,
                "front": "uvicorn",
                "log_level": log_level,
                "certfile": certfile,
                "keyfile": keyfile,
                "keepalive_s": keepalive_s,
                "graceful_timeout_s": graceful_timeout_s,
                "max_connections": max_connections,
            }
            code = run_workers(
                spec, host=host, port=port, workers=workers, grace_s=grace, banner=banner
            )
            if code:
                raise SystemExit(code)
            return
        serve_uvicorn(
            app,
            sock=_bind(host, port),
            host=host,
            port=port,
            log_level=log_level,
            keepalive_s=keepalive,
            graceful_timeout_s=grace,
            max_connections=connections,
            certfile=certfile,
            keyfile=keyfile,
            banner=banner,
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
        _bind(host, port).close()  # a port in use is one clear error, not a traceback
        _announce(banner)
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
        raise ConfigurationError(f"unknown HTTP server {http!r}: use native, uvicorn or granian")


def run_workers(
    spec: dict[str, Any],
    *,
    host: str,
    port: int,
    workers: int,
    grace_s: float,
    banner: str | None = None,
) -> int:
    """``workers`` processes of ``python -m millimcp.server.worker`` serving ``spec`` on one
    socket bound here (:class:`~millimcp.transports.supervisor.Supervisor`); its exit status."""
    from millimcp.transports.supervisor import Supervisor, exec_worker, listen

    sock = listen(host, port)
    try:
        return Supervisor(exec_worker(sock, spec), workers, grace_s=grace_s, banner=banner).run()
    finally:
        sock.close()


def serve_uvicorn(
    app: Any,
    *,
    sock: socket.socket,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    keepalive_s: float | None = None,
    graceful_timeout_s: float | None = None,
    max_connections: int | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    banner: str | None = None,
    on_ready: Callable[[], None] | None = None,
    lifeline: int | None = None,
) -> None:
    """One uvicorn process (:class:`~millimcp.server.graceful.GracefulServer`) on ``sock``,
    blocking: the header deadline, the drain on SIGTERM/SIGINT (or when the pipe
    ``lifeline`` ends), ``on_ready`` called once it listens."""
    try:
        import uvicorn
    except ImportError:
        raise ConfigurationError(
            "uvicorn is not installed: pip install 'millimcp[serve]'"
        ) from None
    from millimcp.server.graceful import GracefulServer

    limits = _limits(app)
    keepalive = limits.keepalive_timeout_s if keepalive_s is None else keepalive_s
    grace = limits.graceful_timeout_s if graceful_timeout_s is None else graceful_timeout_s
    connections = limits.max_connections if max_connections is None else max_connections
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop" if _has("uvloop") else "asyncio",
        http=_protocol(limits.header_timeout_s),
        access_log=False,
        log_level=log_level,
        timeout_keep_alive=max(1, round(keepalive)),
        timeout_graceful_shutdown=max(1, round(grace)),
        limit_concurrency=connections,
        lifespan="on",
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
    )
    server = GracefulServer(config)
    server.banner = banner
    server.on_ready = on_ready
    server.lifeline = lifeline
    server.run(sockets=[sock])
    if not server.started:
        raise ConfigurationError("the server did not start (its error is above)")


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for the server to listen on (and its workers)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise ConfigurationError(f"cannot listen on {host}:{port}: {reason}") from None
    sock.set_inheritable(True)
    return sock


def _check_tls(certfile: str, keyfile: str) -> None:
    """That ``certfile`` and ``keyfile`` load as a PEM pair (the native front's own check)."""
    from millimcp.transports.native.server import tls_context

    tls_context(certfile, keyfile)


def _protocol(header_timeout_s: float) -> Any:
    """uvicorn's HTTP protocol: httptools with the header deadline where it can be had."""
    if not _has("httptools"):
        return "h11"
    from millimcp.server.graceful import deadline_protocol

    return deadline_protocol(header_timeout_s)


def _announce(banner: str | None) -> None:
    if banner is not None:
        print(banner, file=sys.stderr, flush=True)


def _is_endpoint(app: Any) -> bool:
    """Whether ``app`` is a millimcp endpoint app, protected or not (what the native front
    serves)."""
    from millimcp.transports.native.server import endpoint_of

    return endpoint_of(app) is not None


def _limits(app: Any) -> HttpConfig:
    """The HTTP settings of ``app`` (a :class:`StreamableHTTPApp`, maybe wrapped)."""
    from millimcp.transports.http import HttpConfig

    for _ in range(8):
        config = getattr(app, "config", None)
        if isinstance(config, HttpConfig):
            return config
        app = getattr(app, "app", None)
    return HttpConfig()


_GRANIAN_LEVELS = frozenset({"critical", "error", "warning", "warn", "info", "debug"})


def _has(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
