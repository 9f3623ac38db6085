"""``millimcp serve module:server`` (also ``python -m millimcp``).

Binds 127.0.0.1 unless told otherwise; keep-alive on; TCP_NODELAY (every front sets it on
accepted sockets); access logs off. The native HTTP/1.1 front (asyncio.Protocol + httptools,
no ASGI layer) is the default: it passes the same conformance, interop and hostile-input tests
as uvicorn at less CPU per call than the bare ASGI floor; ``--http uvicorn|granian`` (or
``MILLIMCP_HTTP_FRONT``) picks an ASGI server instead, see docs/serving.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from millimcp.errors import ConfigurationError, MissingExtra
from millimcp.server.serve import FRONT_ENV, FRONTS, default_front, load_target, run_app
from millimcp.transports.http import HttpConfig

__all__ = ["load_target", "main"]


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (and status 2), pointing at ``--help``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _check_module(spec: str) -> None:
    """That ``spec``'s module can be found, without running it (workers import it)."""
    import importlib.util

    module_name = spec.partition(":")[0]
    sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(module_name) if module_name else None
    except (ImportError, ValueError) as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}") from None
    if found is None:
        raise ConfigurationError(f"cannot import {module_name!r}: no module named {module_name!r}")


LAB_COMMANDS = ("bench", "profile", "compare", "report", "scenario", "link")
"""Subcommands delegated to :func:`millimcp.lab.cli.main` (the ``lab`` extra)."""


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2: a usage error, or an optional
    dependency missing: :class:`~millimcp.errors.MissingExtra` is printed as one line)."""
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except MissingExtra as exc:
        print(f"millimcp: {exc}", file=sys.stderr)
        return 2


def _main(argv: list[str]) -> int:
    if argv and argv[0] in LAB_COMMANDS:
        from millimcp.lab.cli import main as lab_main

        return lab_main(argv)
    if argv and argv[0] == "compat":  # millimcp compat run TARGET [ARGS...]
        from millimcp.compat.__main__ import main as compat_main

        return compat_main(argv[1:])
    parser = _Parser(
        prog="millimcp",
        description="The millimcp command line.",
        epilog="The latency lab (pip install 'millimcp[lab]'): millimcp "
        + " | ".join(LAB_COMMANDS)
        + " (each has --help). A FastMCP-family server, unmodified: millimcp compat run "
        "TARGET [ARGS...].",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve an MCP server over Streamable HTTP or stdio")
    serve.add_argument(
        "target", help="module:attribute of a millimcp Server (default attr: server)"
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--path", default="/mcp")
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument(
        "--http",
        choices=FRONTS,
        help=f"the HTTP server (default: native, or ${FRONT_ENV}): millimcp's native "
        "HTTP/1.1 front, or the ASGI app under uvicorn or granian",
    )
    serve.add_argument("--log-level", default="warning")
    serve.add_argument("--certfile", help="TLS certificate chain (PEM); needs --keyfile")
    serve.add_argument("--keyfile", help="TLS private key (PEM; PKCS#8 for granian)")
    serve.add_argument(
        "--stdio", action="store_true", help="serve stdin/stdout instead of HTTP (logs: stderr)"
    )
    serve.add_argument(
        "--graceful-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, how long calls in progress get to finish (default 30)",
    )
    serve.add_argument(
        "--health-path",
        metavar="PATH",
        help="readiness endpoint (e.g. /healthz): 200 while serving, 503 once draining",
    )
    args = parser.parse_args(argv)
    if args.command == "serve" and (args.certfile is None) != (args.keyfile is None):
        parser.error("--certfile and --keyfile go together")
    if args.command == "serve":
        return _serve(args)
    return 2


def _serve(args: argparse.Namespace) -> int:
    if args.stdio:
        return _serve_stdio(args)
    try:
        front = args.http or default_front()
    except ConfigurationError as exc:
        print(f"millimcp: {exc}", file=sys.stderr)
        return 2
    if front == "native":  # args.http None: native unless the app is not an endpoint app
        return _serve_native(args)
    args.http = front
    try:
        _serve_http(args)
    except ConfigurationError as exc:
        print(f"millimcp: {exc}", file=sys.stderr)
        return 2
    return 0


def _serve_http(args: argparse.Namespace) -> None:
    scheme = "https" if args.certfile else "http"
    host = f"[{args.host}]" if ":" in args.host else args.host
    banner = (
        f"millimcp: serving {scheme}://{host}:{args.port}{args.path} (Ctrl-C or SIGTERM to stop)"
    )
    options: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level,
        "certfile": args.certfile,
        "keyfile": args.keyfile,
        "graceful_timeout_s": args.graceful_timeout,
        "banner": banner,
    }
    if args.workers > 1 or args.http == "granian":
        _check_module(args.target)  # fail here, in one line, not in each worker
        # Workers import the app themselves; they must all seal MRTR state with one key.
        os.environ.setdefault("MILLIMCP_STATE_KEY", os.urandom(32).hex())
    if args.workers > 1 and args.http != "granian":
        _serve_workers(args)
        return
    if args.http == "granian":
        os.environ["MILLIMCP_APP_TARGET"] = args.target
        os.environ["MILLIMCP_APP_PATH"] = args.path
        run_app("millimcp._worker:app", workers=args.workers, http=args.http, **options)
        return
    server = load_target(args.target)
    if not callable(getattr(server, "asgi", None)):
        raise ConfigurationError(f"{args.target!r} is not a millimcp Server")
    config = HttpConfig(
        path=args.path, graceful_timeout_s=args.graceful_timeout, health_path=args.health_path
    )
    run_app(server.asgi(http=config), **options)


def _serve_workers(args: argparse.Namespace) -> None:
    """``--workers N`` (uvicorn or native): a supervisor of N processes on one socket, each
    importing the target itself (:mod:`millimcp.transports.supervisor`; SIGHUP restarts them
    one by one)."""
    from millimcp.server.serve import run_workers

    spec = {
        "target": args.target,
        "front": args.http,  # None: each worker picks (server.serve.front_for)
        "path": args.path,
        "graceful_timeout_s": args.graceful_timeout,
        "health_path": args.health_path,
        "log_level": args.log_level,
        "certfile": args.certfile,
        "keyfile": args.keyfile,
    }
    scheme = "https" if args.certfile else "http"
    host = f"[{args.host}]" if ":" in args.host else args.host
    front = args.http or default_front()
    banner = (
        f"millimcp: serving {scheme}://{host}:{args.port}{args.path} ({args.workers} "
        f"{front} workers, pid {os.getpid()}; SIGHUP restarts them one by one; Ctrl-C or "
        "SIGTERM to stop)"
    )
    code = run_workers(
        spec,
        host=args.host,
        port=args.port,
        workers=args.workers,
        grace_s=args.graceful_timeout,
        banner=banner,
    )
    if code:
        raise SystemExit(code)


def _serve_native(args: argparse.Namespace) -> int:
    """The native front: the app is built once (``--workers N``: see :func:`_serve_workers`).

    Without ``--http`` an app the native front cannot serve goes to uvicorn
    (:func:`~millimcp.server.serve.front_for`); a protected server's is served natively."""
    if args.workers > 1:
        try:
            _check_module(args.target)
            os.environ.setdefault("MILLIMCP_STATE_KEY", os.urandom(32).hex())
            _serve_workers(args)
        except ConfigurationError as exc:
            print(f"millimcp: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        server = load_target(args.target)
        if not callable(getattr(server, "asgi", None)):
            raise ConfigurationError(f"{args.target!r} is not a millimcp Server")
        config = HttpConfig(
            path=args.path, graceful_timeout_s=args.graceful_timeout, health_path=args.health_path
        )
        scheme = "https" if args.certfile else "http"
        host = f"[{args.host}]" if ":" in args.host else args.host
        run_app(
            server.asgi(http=config),
            host=args.host,
            port=args.port,
            workers=args.workers,
            http=args.http,
            log_level=args.log_level,
            graceful_timeout_s=args.graceful_timeout,
            certfile=args.certfile,
            keyfile=args.keyfile,
            banner=f"millimcp: serving {scheme}://{host}:{args.port}{args.path} "
            "(Ctrl-C or SIGTERM to stop)",
        )
    except ConfigurationError as exc:
        print(f"millimcp: {exc}", file=sys.stderr)
        return 2
    return 0


def _serve_stdio(args: argparse.Namespace) -> int:
    """Serve stdio until EOF or a signal, then exit at once.

    A sync tool still running in a thread cannot be interrupted; rather than wait for it (a
    client that closed stdin or sent SIGTERM wants the process gone), exit without joining
    it once the protocol output is flushed.
    """
    import logging
    import threading

    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper())
    try:
        server = load_target(args.target)
    except ConfigurationError as exc:
        print(f"millimcp: {exc}", file=sys.stderr)
        return 2
    if not callable(getattr(server, "run_stdio", None)):
        print(f"millimcp: {args.target!r} is not a millimcp Server", file=sys.stderr)
        return 2
    server.run_stdio()  # returns on EOF, SIGTERM or SIGINT: all clean exits
    if threading.active_count() > 1:
        sys.stderr.flush()
        os._exit(0)
    return 0
