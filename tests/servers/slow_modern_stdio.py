"""A stdio server that answers its first request late and then serves only the modern era,
refusing ``initialize`` the way the official SDK does on a connection that served a modern
request first: the shape of a server slow to start on a loaded machine."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

DELAY_S = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0


def main() -> None:
    first = True
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        if first:
            time.sleep(DELAY_S)
            first = False
        if message["method"] == "server/discover":
            reply: dict[str, Any] = {
                "result": {
                    "capabilities": {"tools": {}},
                    "supportedVersions": ["2026-07-28"],
                    "resultType": "complete",
                    "_meta": {
                        "io.modelcontextprotocol/serverInfo": {"name": "slow", "version": "1"}
                    },
                }
            }
        elif message["method"] == "initialize":
            reply = {
                "error": {
                    "code": -32022,
                    "message": "connection is serving 2026-07-28; initialize is not accepted",
                    "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"},
                }
            }
        else:
            reply = {"error": {"code": -32601, "message": "method not found"}}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
