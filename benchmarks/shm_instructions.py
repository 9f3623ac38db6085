"""The tensor bookkeeping of a shared-memory round trip, in CPU instructions (callgrind).

``shared_memory.py`` times the round trip between two processes; on a loaded machine its wall
and CPU times move from run to run. This counts the instructions of what the shared-memory
path adds to a ``tools/call``, both sides, in one process and with no event loop or socket (a
loopback run under valgrind is not deterministic: timers and reads split differently):

- client: ``ClientTensors.prepare`` (pack the arguments, take a pooled segment, copy them in,
  the ``shm:`` references), the arguments through JSON as the server decodes them
  (``TensorValue``);
- server: ``shared_memory_peer`` (the client's offer), the argument mapped and unpacked
  (``RequestAttachment.get_shared``), the result packed and copied into a reply segment
  (``encode_result``), its links through JSON;
- client: ``ClientTensors.decode`` (the result mapped in place, the argument segment given
  back, the reply segment reclaimed on the next call).

Each count is taken twice, with different numbers of round trips, and the difference is
reported per round trip (start-up and imports cancel out). With the default small tensor the
copies are a few instructions and the figure is the bookkeeping alone:

    .venv/bin/python benchmarks/shm_instructions.py [--calls 400] [--floats 16]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any

from instructions import callgrind_count


def drive(calls: int, floats: int) -> None:
    """``calls`` shared-memory round trips of ``floats`` float32, after a warm-up."""
    import msgspec
    import numpy as np

    from millimcp.client.tensors import ClientTensors
    from millimcp.protocol.types import ResourceLink, ServerCapabilities
    from millimcp.tensor.extension import (
        RequestAttachment,
        TensorValue,
        capability,
        encode_result,
        shared_memory_peer,
        tensor_param,
    )

    class Server:  # what the client knows of the server: its capabilities
        server_capabilities = ServerCapabilities(extensions={"dev.millimcp/tensor": capability()})

    vector = np.arange(floats, dtype=np.float32)
    client = ClientTensors(declare=True, shared_memory=True)
    extensions = client.capability()  # what the client states on every request
    param = tensor_param(np.ndarray)
    assert param is not None
    values = msgspec.json.Decoder(dict[str, TensorValue])
    links = msgspec.json.Decoder(list[ResourceLink])
    try:
        for _ in range(20 + calls):
            arguments, call = client.prepare({"x": vector}, None, Server())
            assert arguments is not None
            wire = values.decode(msgspec.json.encode(arguments))  # the server's side
            peer = shared_memory_peer(extensions)
            attachment = RequestAttachment(None, shared=peer is not None)
            x = param.decode(wire["x"], attachment)
            content, _ = encode_result(x, True, shared_memory_peer(extensions))
            del x, attachment
            blocks: Any = links.decode(msgspec.json.encode(content))  # back to the client
            tensors = client.decode(blocks, call, None, None)
            assert tensors is not None
            assert tensors["result"].shape == (floats,)
            del tensors
    finally:
        client.close()


def instructions(calls: int, floats: int) -> int:
    return callgrind_count(__file__, "--child", "--calls", str(calls), "--floats", str(floats))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--floats", type=int, default=16, help="float32 values per tensor")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        drive(args.calls, args.floats)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    few = args.calls // 4
    low, high = instructions(few, args.floats), instructions(args.calls, args.floats)
    per_call = (high - low) / (args.calls - few)
    print(
        f"shared-memory bookkeeping, {args.floats} float32 there and back:"
        f" {per_call:,.0f} instructions per round trip (client + server)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
