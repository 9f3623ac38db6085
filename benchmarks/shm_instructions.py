"""The shared-memory round trip in CPU instructions: what it costs beyond the bound, exactly.

``shared_memory.py`` times the round trip between two processes; on a loaded machine its wall
and CPU times move from run to run. This counts instructions instead (callgrind), in one
process that holds both sides: a millimcp server on the native front (127.0.0.1, a real
socket) and a ``Client.over_http(url, shared_memory="auto")``, so every step of both sides is
counted (the kernel's work is not). Each case runs twice with different call counts and the
difference is reported per call (start-up, imports and warm-up cancel out; four runs: one
with few calls of every case, then one per case with more of it):

- ``shm``: the ``roundtrip`` tool, 1M float32 (4 MB) there and back through shared memory;
- ``ping``: a trivial ``tools/call`` from the same client;
- ``memcpy``: one 4 MB ``memcpy`` (a memoryview slice assignment, as the segments are filled;
  numpy's ``copyto``, which ``shared_memory.py`` times, runs its own loop: 6x the instructions
  for the same bytes).

``shm - ping - 2 x memcpy`` is the tensor bookkeeping of both sides (pack and unpack the
documents, map and check the segments, the links in the result): the figure to judge a
change by. Needs valgrind.

    .venv/bin/python benchmarks/shm_instructions.py [--calls 60]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
N = 1_000_000
CASES = ("shm", "ping", "memcpy")


async def drive(calls: dict[str, int]) -> None:
    """Serve ``millimcp_tensors`` on the native front and make ``calls[case]`` calls of each
    case (after a warm-up of every case)."""
    import numpy as np

    sys.path.insert(0, str(HERE / "servers"))
    import millimcp_tensors

    from millimcp import Client
    from millimcp.transports.native import NativeServer

    vector = np.random.default_rng(2).standard_normal(N).astype(np.float32)
    server = NativeServer(millimcp_tensors.app, port=0)
    await server.start()
    url = f"http://127.0.0.1:{server.port}/mcp"
    try:
        async with Client.over_http(url, shared_memory="auto", max_attachment_bytes=64 << 20) as c:

            async def shm() -> None:
                result = await c.call_tool("roundtrip", {"x": vector})
                assert result.tensors is not None
                assert result.tensors["result"].shape == (N,)

            async def ping() -> None:
                await c.call_tool("ping")

            source = memoryview(vector).cast("B")
            target = memoryview(bytearray(len(source)))

            async def memcpy() -> None:
                target[:] = source

            run = {"shm": shm, "ping": ping, "memcpy": memcpy}
            for _ in range(5):
                for warm in run.values():
                    await warm()
            for case, count in calls.items():
                for _ in range(count):
                    await run[case]()
    finally:
        await server.close()


def instructions(calls: dict[str, int]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src"), "PYTHONHASHSEED": "0"}
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
             __file__, "--child", ",".join(f"{case}={n}" for case, n in calls.items())],
            check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        match = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        if match is None:
            raise SystemExit(f"no summary line in {out}")
        return int(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import uvloop

        counts = dict(item.split("=") for item in args.child.split(","))
        uvloop.run(drive({case: int(n) for case, n in counts.items()}))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    few = args.calls // 3
    base = instructions(dict.fromkeys(CASES, few))
    per_call = {}
    for case in CASES:
        more = instructions({**dict.fromkeys(CASES, few), case: args.calls})
        per_call[case] = (more - base) / (args.calls - few)
        print(f"  {case:8} {per_call[case]:12,.0f} instructions per call", flush=True)
    extra = per_call["shm"] - per_call["ping"] - 2 * per_call["memcpy"]
    print(f"  shm - ping - 2 x memcpy: {extra:,.0f} instructions (the tensor bookkeeping)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
