"""The app each worker process imports when ``millimcp serve`` runs several workers."""

from __future__ import annotations

import os

from millimcp.cli import load_target

app = load_target(os.environ["MILLIMCP_APP_TARGET"]).asgi(
    path=os.environ.get("MILLIMCP_APP_PATH", "/mcp")
)
