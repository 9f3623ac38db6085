"""Serve a server module's ``mcp`` object, on its real framework or (``--shim``) on millimcp:
``python serve.py SERVER.py stdio [--shim]`` or ``python serve.py SERVER.py PORT [--shim]``
(Streamable HTTP on 127.0.0.1:PORT). For modules that do not run themselves under
``__main__`` (the SDK's examples are started by ``mcp run``)."""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    path, where = sys.argv[1], sys.argv[2]
    if "--shim" in sys.argv[3:]:
        from millimcp.compat.hook import install

        install()
    namespace = runpy.run_path(path, run_name="served")
    server = namespace["mcp"]
    if where == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(where))


if __name__ == "__main__":
    main()
