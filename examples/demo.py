"""`make demo` until the case study lands: start a millimcp server, call a tool, print it.

Starts examples/conformance_server.py on 127.0.0.1, sends ``server/discover`` and a
``tools/call`` over Streamable HTTP exactly as a 2026-07-28 client does (one POST each, with
the ``MCP-Protocol-Version``/``Mcp-Method``/``Mcp-Name`` headers and per-request ``_meta``),
prints what came back and how long each call took, and stops the server.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "millimcp-demo", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(url: str, request_id: int, method: str, params: dict[str, Any]) -> tuple[Any, float]:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": META},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=10) as response:
        payload = json.loads(response.read())
    return payload, (time.perf_counter() - started) * 1000


def wait_for(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"the server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit("the server did not start within 30 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    here = Path(__file__).parent
    server = subprocess.Popen(
        [sys.executable, str(here / "conformance_server.py"), "--port", str(args.port)]
    )
    try:
        wait_for(args.port, server)
        url = f"http://127.0.0.1:{args.port}/mcp"
        print(f"millimcp server on {url}\n")
        discover, ms = call(url, 1, "server/discover", {})
        info = discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
        print(
            f"server/discover  {ms:6.1f} ms  {info['name']} {info['version']}, "
            f"versions {discover['result']['supportedVersions']}"
        )
        for request_id in range(2, 5):
            result, ms = call(url, request_id, "tools/call", {"name": "test_simple_text"})
            text = result["result"]["content"][0]["text"]
            print(f"tools/call       {ms:6.1f} ms  test_simple_text -> {text!r}")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
