"""Server CPU per ``tools/call`` with auth on (a cached JWT on every request) against off.

Drives both ASGI apps in-process (no HTTP server: the framework's own work) in alternating
rounds, each round ``--calls`` calls timed with ``time.process_time``, and reports the median
per call of each and the difference. The same request and apps as ``instructions.py``'s
``millimcp`` and ``millimcp_jwt`` targets (whose instruction counts are the noise-free
version of this)::

    .venv/bin/python benchmarks/auth_overhead.py [--rounds 7] [--calls 5000]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    drive = _load("bench_instructions", HERE / "instructions.py").drive
    targets = {
        "no auth": _load("bench_plain", HERE / "servers" / "millimcp_echo.py"),
        "cached JWT": _load("bench_jwt", HERE / "servers" / "millimcp_jwt.py"),
    }
    import uvloop

    per_call: dict[str, list[float]] = {name: [] for name in targets}
    for _ in range(args.rounds):
        for name, module in targets.items():
            extra = getattr(module, "HEADERS", ())
            start = time.process_time()
            uvloop.run(drive(module.app, args.calls, extra))
            per_call[name].append((time.process_time() - start) / args.calls * 1e6)
    medians = {name: statistics.median(values) for name, values in per_call.items()}
    for name, value in medians.items():
        spread = ", ".join(f"{v:.1f}" for v in per_call[name])
        print(f"{name:11s} {value:7.1f} µs CPU per call (median of {args.rounds}: {spread})")
    extra_us = medians["cached JWT"] - medians["no auth"]
    ratio = medians["cached JWT"] / medians["no auth"]
    print(f"auth adds {extra_us:+.1f} µs per call ({ratio:.3f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
