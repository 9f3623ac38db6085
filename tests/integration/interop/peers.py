"""Shared helpers for the interop tests: the official `mcp` client, the Inspector CLI and
the reference server `@modelcontextprotocol/server-everything`.

* `official_client(target, mode=...)`: the official Python SDK client (`mcp` 2.3.0) on a
  URL or a stdio command, optionally with a `WireLog` that records every HTTP exchange;
* `stdio_command(...)`: how the client launches `python -m millimcp serve ... --stdio`;
* `inspector_argv(missing_tool)` and `run_inspector(...)`: the MCP Inspector CLI (2.12.0),
  run as a real Node subprocess;
* `server_everything_argv(missing_tool)`: `node <server-everything>` (2026.8.31), to be
  followed by its transport (`stdio` or `streamableHttp`, whose port is `PORT`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation, TextContent

ROOT = Path(__file__).resolve().parents[3]

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
CLIENT_INFO = Implementation(name="millimcp-interop", version="0.0.0")
TIMEOUT_S = 60

STATIC_TEXT_URI = "test://static-text"
STATIC_TEXT = "This is the content of the static text resource."
SIMPLE_PROMPT = "test_simple_prompt"
SIMPLE_PROMPT_TEXT = "This is a simple prompt for testing."


@dataclass
class WireLog:
    """What the official client put on the wire, and the response heads it got back."""

    requests: list[tuple[dict[str, str], dict[str, Any]]] = field(default_factory=list)
    responses: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    raw_bodies: list[bytes] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    """The HTTP method of each request, in order (`POST`, `GET`, `DELETE`)."""

    async def on_request(self, request: httpx2.Request) -> None:
        body = request.content
        self.methods.append(request.method)
        self.raw_bodies.append(body)
        self.requests.append((dict(request.headers), json.loads(body) if body else {}))

    async def on_response(self, response: httpx2.Response) -> None:
        self.responses.append((response.status_code, dict(response.headers)))

    def posted(self) -> list[dict[str, Any]]:
        """The JSON-RPC bodies of the POSTs, in order."""
        pairs = zip(self.requests, self.methods, strict=True)
        return [body for (_, body), verb in pairs if verb == "POST"]


def stdio_command(target: str = "tests.servers.basic_server:server") -> StdioServerParameters:
    """`python -m millimcp serve <target> --stdio`, run from the repository root."""
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "millimcp", "serve", target, "--stdio"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": pythonpath},
    )


STDIO_TAP = Path(__file__).with_name("stdio_tap.py")


def tapped(command: list[str], log: Path) -> list[str]:
    """`command` behind tests/integration/interop/stdio_tap.py, which records each line in `log`."""
    return [sys.executable, str(STDIO_TAP), str(log), *command]


def tap_messages(log: Path) -> list[tuple[str, dict[str, Any]]]:
    """What the tap recorded: (`>` client to server, or `<` server to client; message)."""
    lines = log.read_bytes().splitlines()
    return [(line[:1].decode(), json.loads(line[2:])) for line in lines if line.strip()]


@asynccontextmanager
async def official_client(
    target: str | StdioServerParameters,
    *,
    mode: str = MODERN,
    wire: WireLog | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """The official client on a URL or a stdio command, negotiating as `mode` says.

    `mode` is `"legacy"` (the initialize handshake), `"auto"` (probe `server/discover`,
    fall back to initialize) or a modern version to adopt directly. `cache=None` so every
    call reaches the server. `options` go to `Client` (callbacks). Used as a context manager
    inside each test (not as an async fixture): the client holds anyio task groups that
    must be entered and exited in one task.
    """
    async with AsyncExitStack() as stack:
        server: Any = target
        if wire is not None:
            assert isinstance(target, str), "a WireLog records HTTP only"
            http_client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    timeout=httpx2.Timeout(TIMEOUT_S),
                    event_hooks={"request": [wire.on_request], "response": [wire.on_response]},
                )
            )
            server = streamable_http_client(target, http_client=http_client)
        yield await stack.enter_async_context(
            Client(
                server,
                mode=mode,
                cache=None,
                client_info=CLIENT_INFO,
                read_timeout_seconds=TIMEOUT_S,
                **options,
            )
        )


def texts(content: list[Any]) -> list[str]:
    return [block.text for block in content if isinstance(block, TextContent)]


class TcpTap:
    """A TCP relay on 127.0.0.1 in front of `upstream_port` that records both directions.

    For peers whose HTTP traffic cannot be hooked from Python (the Inspector): point them
    at `url(path)` and read `sent` / `received` (per connection, in order) afterwards.
    """

    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)  # lets the accept loop notice `close`
        self.port: int = self._listener.getsockname()[1]
        self.sent: list[bytearray] = []
        self.received: list[bytearray] = []
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._accepter = threading.Thread(target=self._accept, daemon=True)
        self._accepter.start()

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            server = socket.create_connection(self._upstream)
            self._sockets += [client, server]
            self.sent.append(bytearray())
            self.received.append(bytearray())
            for pipe in (
                (client, server, self.sent[-1]),
                (server, client, self.received[-1]),
            ):
                thread = threading.Thread(target=self._pump, args=pipe, daemon=True)
                self._threads.append(thread)
                thread.start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, record: bytearray) -> None:
        try:
            while data := source.recv(65536):
                record += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._stop.set()
        self._accepter.join(timeout=TIMEOUT_S)
        self._listener.close()
        for sock in self._sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=TIMEOUT_S)
        for sock in self._sockets:
            sock.close()


@dataclass(frozen=True)
class TappedRequest:
    """One HTTP/1.1 request a client sent through a `TcpTap`."""

    verb: str
    headers: dict[str, str]  # names lower-cased
    body: bytes

    @property
    def message(self) -> dict[str, Any]:
        """The JSON-RPC message in the body (`{}` for none)."""
        return json.loads(self.body) if self.body else {}


def tapped_requests(tap: TcpTap) -> list[TappedRequest]:
    """The requests of every connection (connection by connection, each in order).

    Bodies are framed by Content-Length, which is how Node's fetch sends a string body.
    """
    found: list[TappedRequest] = []
    for stream in tap.sent:
        rest = bytes(stream)
        while rest:
            head, separator, rest = rest.partition(b"\r\n\r\n")
            assert separator, f"an unfinished request head: {head[:200]!r}"
            request_line, *lines = head.decode("latin-1").split("\r\n")
            headers = {}
            for line in lines:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            assert "transfer-encoding" not in headers, headers
            length = int(headers.get("content-length", "0"))
            found.append(TappedRequest(request_line.split(" ")[0], headers, rest[:length]))
            rest = rest[length:]
    return found


def issued_session_ids(tap: TcpTap) -> set[str]:
    """Every `Mcp-Session-Id` response header the server sent through `tap`."""
    pattern = re.compile(rb"^mcp-session-id:[ \t]*([!-~]+)\r$", re.IGNORECASE | re.MULTILINE)
    return {match.decode() for stream in tap.received for match in pattern.findall(stream)}


@contextmanager
def tcp_tap(url: str) -> Iterator[TcpTap]:
    """A `TcpTap` in front of the server at `url` (`http://127.0.0.1:PORT/...`)."""
    port = urlsplit(url).port
    assert port is not None, url
    tap = TcpTap(port)
    try:
        yield tap
    finally:
        tap.close()


# --- The Inspector CLI ------------------------------------------------------------------

INSPECTOR_ENV = "MILLIMCP_INSPECTOR"
NODE_ENV = "MILLIMCP_NODE"
MIN_NODE = (22, 19)  # the package's engines: node >= 22.19.0


@cache
def _node() -> tuple[str | None, str]:
    """The Node binary to use and, when unusable, why."""
    configured = os.environ.get(NODE_ENV)
    if configured:
        path = Path(configured)
        node = str(path / "node") if path.is_dir() else configured
    else:
        found = shutil.which("node")
        if found is None:
            return None, f"no `node` on PATH and {NODE_ENV} is not set"
        node = found
    try:
        version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=TIMEOUT_S, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cannot run {node!r}: {exc}"
    match = re.match(r"v(\d+)\.(\d+)\.", version)
    if match is None or (int(match.group(1)), int(match.group(2))) < MIN_NODE:
        need = ".".join(map(str, MIN_NODE))
        return None, f"the Inspector needs Node >= {need}; {node!r} is {version or '?'}"
    return node, ""


def inspector_argv(missing_tool: Callable[[str], None]) -> list[str]:
    """argv prefix `node <inspector> --cli`, or `missing_tool(reason)` (skip, or fail)."""
    entry = os.environ.get(INSPECTOR_ENV)
    if not entry:
        missing_tool(
            f"{INSPECTOR_ENV} is not set (path to @modelcontextprotocol/inspector@2.12.0's "
            "clients/cli/build/index.js; see tests/integration/interop/test_inspector.py)"
        )
    assert entry is not None
    if not Path(entry).is_file():
        missing_tool(f"{INSPECTOR_ENV}={entry!r} is not a file")
    # The Inspector runs only when started by its real path (it compares argv[1] with its
    # own module URL), so a path through a symlinked folder must be resolved.
    entry = os.path.realpath(entry)
    node, why = _node()
    if node is None:
        missing_tool(why)
    assert node is not None
    return [node, entry, "--cli"]


def run_inspector(
    inspector: list[str], tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run the Inspector CLI with a private HOME (its catalog, storage and OAuth files)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    node_dir = str(Path(inspector[0]).parent)
    env = {
        **os.environ,
        "HOME": str(home),
        "USERPROFILE": str(home),
        "MCP_CATALOG_PATH": str(home / "catalog.json"),
        "NO_COLOR": "1",
        "PATH": node_dir + os.pathsep + os.environ.get("PATH", ""),
    }
    return subprocess.run(
        [*inspector, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
        check=False,
        cwd=tmp_path,
    )


def inspector_result(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The `result` object of a successful `--format json` run."""
    assert proc.returncode == 0, (
        f"inspector exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    )
    output = json.loads(proc.stdout)
    assert isinstance(output, dict)
    assert "result" in output, output
    result = output["result"]
    assert isinstance(result, dict)
    return result


# --- server-everything ------------------------------------------------------------------

EVERYTHING_ENV = "MILLIMCP_SERVER_EVERYTHING"
EVERYTHING_ENTRY = Path("@modelcontextprotocol", "server-everything", "dist", "index.js")
LOOPBACK_ONLY = Path(__file__).with_name("loopback_only.mjs")


def _everything_entry() -> str | None:
    """`MILLIMCP_SERVER_EVERYTHING`, else the package beside the Inspector or Node's package
    (`make tools` installs all three in one `node_modules`), else `.tools` of this checkout."""
    configured = os.environ.get(EVERYTHING_ENV)
    if configured:
        return configured
    places: list[Path] = []
    for variable in (INSPECTOR_ENV, NODE_ENV):
        value = os.environ.get(variable)
        if value:
            parts = Path(value).resolve().parts
            if "node_modules" in parts:
                index = len(parts) - 1 - parts[::-1].index("node_modules")
                places.append(Path(*parts[: index + 1]))
    places.append(ROOT / ".tools" / "node_modules")
    for place in places:
        if (place / EVERYTHING_ENTRY).is_file():
            return str(place / EVERYTHING_ENTRY)
    return None


def server_everything_argv(missing_tool: Callable[[str], None]) -> list[str]:
    """argv `node <server-everything>/dist/index.js`, or `missing_tool(reason)`."""
    entry = _everything_entry()
    if entry is None:
        missing_tool(
            f"{EVERYTHING_ENV} is not set (path to @modelcontextprotocol/server-everything"
            "@2026.8.31's dist/index.js; `make tools` installs it)"
        )
    assert entry is not None
    if not Path(entry).is_file():
        missing_tool(f"{EVERYTHING_ENV}={entry!r} is not a file")
    node, why = _node()
    if node is None:
        missing_tool(why)
    assert node is not None
    return [node, entry]
