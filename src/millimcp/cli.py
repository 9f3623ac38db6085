"""``millimcp serve module:server`` (also ``python -m millimcp``).

Binds 127.0.0.1 unless told otherwise; keep-alive on; TCP_NODELAY (both uvicorn and granian
set it on accepted sockets); access logs off. uvicorn with httptools and uvloop is the default
HTTP server: on a raw ASGI app it costs about half the CPU per call of granian's ASGI mode
here (21 vs 42 us), see docs/serving.md.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from millimcp.errors import ConfigurationError, MissingExtra
from millimcp.server.serve import run_app

__all__ = ["load_target", "main"]


def load_target(spec: str) -> Any:
    """Import ``module:attribute`` (attribute defaults to ``server``)."""
    module_name, _, attribute = spec.partition(":")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}") from exc
    try:
        return getattr(module, attribute or "server")
    except AttributeError:
        raise ConfigurationError(f"{module_name!r} has no attribute {attribute!r}") from None


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
    parser = argparse.ArgumentParser(
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
    serve.add_argument("--http", choices=("uvicorn", "granian", "native"), default="uvicorn")
    serve.add_argument("--log-level", default="warning")
    serve.add_argument("--certfile", help="TLS certificate chain (PEM); needs --keyfile")
    serve.add_argument("--keyfile", help="TLS private key (PEM; PKCS#8 for granian)")
    serve.add_argument(
        "--stdio", action="store_true", help="serve stdin/stdout instead of HTTP (logs: stderr)"
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
    if args.http == "native":
        return _serve_native(args)
    if args.workers > 1 or args.http == "granian":
        # Workers import the app themselves; they must all seal MRTR state with one key.
        os.environ.setdefault("MILLIMCP_STATE_KEY", os.urandom(32).hex())
        os.environ["MILLIMCP_APP_TARGET"] = args.target
        os.environ["MILLIMCP_APP_PATH"] = args.path
        run_app(
            "millimcp._worker:app",
            host=args.host,
            port=args.port,
            workers=args.workers,
            http=args.http,
            log_level=args.log_level,
            certfile=args.certfile,
            keyfile=args.keyfile,
        )
        return 0
    try:
        server = load_target(args.target)
    except ConfigurationError as exc:
        print(f"millimcp: {exc}", file=sys.stderr)
        return 2
    run_app(
        server.asgi(path=args.path),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        certfile=args.certfile,
        keyfile=args.keyfile,
    )
    return 0


def _serve_native(args: argparse.Namespace) -> int:
    """The native front: the app is built once; ``--workers N`` forks N processes."""
    if args.workers > 1:  # forked workers seal MRTR state with one key
        os.environ.setdefault("MILLIMCP_STATE_KEY", os.urandom(32).hex())
    try:
        server = load_target(args.target)
    except ConfigurationError as exc:
        print(f"millimcp: {exc}", file=sys.stderr)
        return 2
    run_app(
        server.asgi(path=args.path),
        host=args.host,
        port=args.port,
        workers=args.workers,
        http="native",
        certfile=args.certfile,
        keyfile=args.keyfile,
    )
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
    server.run_stdio()  # returns on EOF, SIGTERM or SIGINT: all clean exits
    if threading.active_count() > 1:
        sys.stderr.flush()
        os._exit(0)
    return 0
