"""The conformance fixture server plus ``whoami`` (the worker's pid), for ``--workers N``
tests that must know which worker answered a request."""

from __future__ import annotations

import os
import sys
from pathlib import Path

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")
if EXAMPLES not in sys.path:  # as the interop tests run it: a script of examples/
    sys.path.insert(0, EXAMPLES)

from conformance_server import server  # noqa: E402

__all__ = ["server"]


@server.tool()
async def whoami() -> str:
    """The pid of the worker process that runs this call."""
    return str(os.getpid())
