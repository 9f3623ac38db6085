"""``python -m tests.fuzz.atheris_run TARGET [--seconds N]``: coverage-guided fuzzing of one
target of :mod:`tests.fuzz.targets` with atheris (``pip install atheris``; ``make fuzz``).

It starts from the target's corpus (``corpus/TARGET/``, read only) and stops after ``N``
seconds; a crashing input is written to ``crashes/TARGET-...`` (git-ignored): add it to the
corpus once the bug is fixed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("--seconds", type=int, default=30)
    args = parser.parse_args()
    atheris: Any = importlib.import_module("atheris")
    with atheris.instrument_imports():
        from tests.fuzz.targets import TARGETS
    target = TARGETS[args.target]
    crashes = HERE / "crashes"
    crashes.mkdir(exist_ok=True)
    seeds = HERE / "corpus" / args.target
    with tempfile.TemporaryDirectory() as scratch:  # new inputs go here, not into git
        argv = [
            sys.argv[0],
            f"-max_total_time={args.seconds}",
            f"-artifact_prefix={crashes}/{args.target}-",
            "-max_len=4096",
            scratch,
            *([str(seeds)] if seeds.is_dir() else []),
        ]
        atheris.Setup(argv, target)
        atheris.Fuzz()


if __name__ == "__main__":
    main()
