"""The lab's command line: ``millimcp bench | profile | compare | report | scenario | link``.

``millimcp.cli`` hands these subcommands to :func:`main`. Each command lives in its own module
(:data:`COMMANDS`) exposing ``add_arguments(parser)`` and ``run(args) -> int`` (the exit
status); a module is imported only when its command runs or shows its ``--help``, and a
command whose module does not exist is left out.

A command that needs an optional dependency that is not installed (the ``lab`` extra: rich,
hdrhistogram, aiohttp through the client) raises :class:`~millimcp.errors.MissingExtra`
where it imports it; :func:`main` prints it as one line naming the command and the
``pip install`` to run, and returns 2.

A stdio TARGET may be given after ``--``: everything after the first ``--`` is the server's
command line, in ``args.command_argv`` (empty when there is none); see
:mod:`millimcp.lab.target`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from typing import Final

from millimcp.errors import MissingExtra

__all__ = ["COMMANDS", "available", "main"]

COMMANDS: Final = {
    "bench": "millimcp.lab.bench",
    "profile": "millimcp.lab.profile",
    "compare": "millimcp.lab.compare",
    "report": "millimcp.lab.report",
    "scenario": "millimcp.lab.scenario",
    "link": "millimcp.lab.link.command",
}
"""Subcommand -> the module that implements it."""


def available() -> list[str]:
    """The subcommands whose module exists in this installation."""
    return [name for name, module in COMMANDS.items() if _exists(module)]


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Run one lab subcommand: ``argv[0]`` is its name. Returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = available()
    if not argv or argv[0] not in commands:
        known = ", ".join(commands) or "none"
        given = repr(argv[0]) if argv else "no command"
        print(f"millimcp: {given} is not a lab command here (available: {known})", file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    command_argv: list[str] = []
    if "--" in rest:
        cut = rest.index("--")
        rest, command_argv = rest[:cut], rest[cut + 1 :]
    try:
        try:
            module = importlib.import_module(COMMANDS[name])
        except MissingExtra:
            raise
        except ImportError as exc:
            raise MissingExtra("lab", f"millimcp {name}", exc.name) from exc
        doc = (module.__doc__ or "").strip()
        parser = argparse.ArgumentParser(
            prog=f"millimcp {name}",
            description=doc.split("\n\n", 1)[0] if doc else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(parser)
        args = parser.parse_args(rest)
        args.command_argv = command_argv
        return int(module.run(args))
    except MissingExtra as exc:  # one line, naming the command and what to install
        print(
            f"millimcp: {MissingExtra(exc.extra, f'millimcp {name}', exc.missing)}", file=sys.stderr
        )
        return 2
