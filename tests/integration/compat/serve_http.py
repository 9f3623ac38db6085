"""Serve a fixture server over Streamable HTTP on 127.0.0.1:PORT, on its real framework or
(``--shim``) on millimcp: ``python serve_http.py SERVER.py PORT [--shim]``."""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    path, port = sys.argv[1], int(sys.argv[2])
    if "--shim" in sys.argv[3:]:
        from millimcp.compat.hook import install

        install()
    namespace = runpy.run_path(path, run_name="fixture")
    namespace["mcp"].run("streamable-http", host="127.0.0.1", port=port)


if __name__ == "__main__":
    main()
