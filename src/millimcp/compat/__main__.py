"""``python -m millimcp.compat run TARGET [ARGS...]``: run an installed FastMCP-family
server on millimcp, unmodified.

TARGET is a module (run as ``__main__``), ``module:function`` (called), a path to a ``.py``
file, or an installed console script (its entry point, called). ``sys.argv`` is
``[TARGET, *ARGS]`` meanwhile, as if TARGET had been started itself.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import runpy
import sys
from typing import Any

from millimcp.compat.hook import install

__all__ = ["main", "run_target"]


def run_target(target: str, args: list[str]) -> Any:
    """Install the hook and run ``target`` with ``args`` as its command line."""
    install()
    sys.argv = [target, *args]
    if target.endswith(".py"):
        return runpy.run_path(target, run_name="__main__")
    if ":" in target:
        module_name, _, attr = target.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj() if callable(obj) else obj
    scripts = importlib.metadata.entry_points(group="console_scripts", name=target)
    for script in scripts:
        return script.load()()
    if importlib.util.find_spec(target) is None:
        raise SystemExit(f"millimcp.compat: no module or console script named {target!r}")
    return runpy.run_module(target, run_name="__main__", alter_sys=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m millimcp.compat",
        description="Run a server written for mcp.server.fastmcp, mcp.server.mcpserver or "
        "fastmcp on millimcp, unmodified.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run TARGET (module, module:function, script, file)")
    run.add_argument("target")
    run.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    result = run_target(options.target, list(options.args))
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
