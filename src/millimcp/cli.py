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

from millimcp.errors import ConfigurationError

__all__ = ["load_target", "main", "run_app"]


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
            from granian import Granian  # type: ignore[import-not-found]
            from granian.constants import Interfaces  # type: ignore[import-not-found]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="millimcp", description="The millimcp command line.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve an MCP server over Streamable HTTP")
    serve.add_argument(
        "target", help="module:attribute of a millimcp Server (default attr: server)"
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--path", default="/mcp")
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--http", choices=("uvicorn", "granian"), default="uvicorn")
    serve.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    return 2


def _serve(args: argparse.Namespace) -> int:
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
        )
        return 0
    try:
        server = load_target(args.target)
    except ConfigurationError as exc:
        print(f"millimcp: {exc}", file=sys.stderr)
        return 2
    run_app(server.asgi(path=args.path), host=args.host, port=args.port, log_level=args.log_level)
    return 0
