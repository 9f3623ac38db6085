"""A stdio relay that records every line both ways: ``python stdio_tap.py LOG COMMAND...``.

Put between an stdio MCP client and its server, it starts ``COMMAND``, copies its own stdin
to the server's and the server's stdout to its own, line by line, and appends each line to
``LOG`` prefixed with ``> `` (client to server) or ``< `` (server to client). The server's
stderr passes through. It exits with the server's status once the server's stdout ends;
SIGTERM and SIGINT are passed on to the server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from contextlib import suppress
from types import FrameType
from typing import IO


def main(log_path: str, command: list[str]) -> int:
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    to_server, from_server = server.stdin, server.stdout
    assert to_server is not None
    assert from_server is not None
    lock = threading.Lock()

    def forward(signum: int, _frame: FrameType | None) -> None:
        server.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)

    with open(log_path, "ab", buffering=0) as log:

        def relay(source: IO[bytes], sink: IO[bytes], mark: bytes) -> None:
            for line in source:
                with lock:
                    log.write(mark + line if line.endswith(b"\n") else mark + line + b"\n")
                try:
                    sink.write(line)
                    sink.flush()
                except OSError:  # the other side is gone
                    break

        def upstream() -> None:
            relay(sys.stdin.buffer, to_server, b"> ")
            with suppress(OSError):
                to_server.close()

        threading.Thread(target=upstream, daemon=True).start()
        relay(from_server, sys.stdout.buffer, b"< ")
        return server.wait()


if __name__ == "__main__":
    status = main(sys.argv[1], sys.argv[2:])
    sys.stdout.flush()
    os._exit(status)  # not sys.exit: the stdin reader may still be blocked in a read
