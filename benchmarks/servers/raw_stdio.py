"""The stdio floor: a framework-free loop that answers every line with a canned result.

It reads one line at a time (blocking), decodes it with msgspec only to recover the JSON-RPC
id, and writes a pre-built ``tools/call`` result with one ``os.write``. Anything an MCP
framework does on top of this is its overhead. ``initialize`` gets a canned answer too, and
notifications (no id) get none, so the same client drives it in both eras.
"""

from __future__ import annotations

import os
import sys

import msgspec


class _Envelope(msgspec.Struct):
    id: int | str | None = None
    method: str = ""


_decode = msgspec.json.Decoder(_Envelope).decode
_encode = msgspec.json.Encoder().encode
_RESULT = b',"result":{"content":[{"type":"text","text":"hello"}],"isError":false}}\n'
_INITIALIZED = (
    b',"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},'
    b'"serverInfo":{"name":"bench","version":"1.0.0"}}}\n'
)


def main() -> None:
    out = sys.stdout.fileno()
    for line in sys.stdin.buffer:
        envelope = _decode(line)
        if envelope.id is None:
            continue
        tail = _INITIALIZED if envelope.method == "initialize" else _RESULT
        os.write(out, b'{"jsonrpc":"2.0","id":' + _encode(envelope.id) + tail)


if __name__ == "__main__":
    main()
