"""A scripted stdio peer for the stdio link's tests: ``python raw_stdio_peer.py [flags]``.

It reads one JSON-RPC message per line and misbehaves on request, by method:

- ``echo``: answers ``{"params": params}``;
- ``big``: answers with a text of ``params.size`` bytes, its id first (``order: "first"``),
  last (``"last"``) or nowhere readable (``"nested"``: a notification of that size instead,
  then the normal answer);
- ``garbage``: writes a line that is not JSON and one that is not JSON-RPC, then answers;
- ``notify``: writes ``params.count`` notifications with a server-to-client request
  (``id: "ask-1"``) after the ``params.ask_after``-th, then answers;
- ``ask``: sends ``roots/list`` (id ``"s1"``) and answers with what the client replies;
- ``stderr``: writes ``params.size`` bytes to stderr, then answers;
- ``env``: answers with the names of its environment variables;
- ``exit``: exits with ``params.code`` without answering;
- ``hang``: never answers.

A ``notifications/cancelled`` is reported on stderr as ``cancelled <requestId> <reason>``.
Flags: ``--linger`` keeps running after stdin ends, ``--ignore-term`` ignores SIGTERM,
``--spawn-child`` starts a sleeping child process and reports ``child <pid>`` on stderr.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any


def write(message: Any) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def report(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def main(flags: list[str]) -> None:
    if "--ignore-term" in flags:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--spawn-child" in flags:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        report(f"child {child.pid}")
    asking: dict[str, Any] = {}
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method = message.get("method")
        request_id = message.get("id")
        params = message.get("params") or {}
        if method is None:  # a response to our request
            original = asking.pop(message["id"])
            write({"jsonrpc": "2.0", "id": original, "result": {"answer": message}})
        elif method == "notifications/cancelled":
            report(f"cancelled {json.dumps(params['requestId'])} {params.get('reason')}")
        elif method == "echo":
            write({"jsonrpc": "2.0", "id": request_id, "result": {"params": params}})
        elif method == "big":
            text = "x" * params["size"]
            order = params["order"]
            if order == "first":
                write({"jsonrpc": "2.0", "id": request_id, "result": {"text": text}})
            elif order == "last":
                write({"result": {"text": text, "id": 5}, "jsonrpc": "2.0", "id": request_id})
            else:
                payload = {"data": {"id": request_id, "text": text}}
                write({"jsonrpc": "2.0", "method": "notifications/message", "params": payload})
                write({"jsonrpc": "2.0", "id": request_id, "result": {"after": "nested"}})
        elif method == "garbage":
            sys.stdout.buffer.write(b"this is not json\n")
            sys.stdout.buffer.write(b'{"not": "json-rpc"}\n')
            write({"jsonrpc": "2.0", "id": request_id, "result": {"after": "garbage"}})
        elif method == "notify":
            for index in range(params["count"]):
                note = {"level": "info", "data": index}
                write({"jsonrpc": "2.0", "method": "notifications/message", "params": note})
                if index == params["ask_after"]:
                    write({"jsonrpc": "2.0", "id": "ask-1", "method": "roots/list"})
            write({"jsonrpc": "2.0", "id": request_id, "result": {"sent": params["count"]}})
        elif method == "ask":
            asking["s1"] = request_id
            write({"jsonrpc": "2.0", "id": "s1", "method": "roots/list", "params": {}})
        elif method == "stderr":
            chunk = "noise " * 1000 + "\n"
            written = 0
            while written < params["size"]:
                sys.stderr.write(chunk)
                written += len(chunk)
            sys.stderr.write("end of noise\n")
            sys.stderr.flush()
            write({"jsonrpc": "2.0", "id": request_id, "result": {"written": written}})
        elif method == "env":
            write({"jsonrpc": "2.0", "id": request_id, "result": {"names": sorted(os.environ)}})
        elif method == "exit":
            report("exiting on request")
            sys.stdout.flush()
            os._exit(params["code"])
    if "--linger" in flags:
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1:])
