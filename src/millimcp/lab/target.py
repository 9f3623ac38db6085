"""TARGET: the MCP server a lab command measures, and the connection to it.

Syntax (the same for every lab command)::

    millimcp bench http://127.0.0.1:8000/mcp --tool echo ...     # Streamable HTTP, either era
    millimcp bench https://mcp.example.com/mcp -H "Authorization: Bearer ..." ...
    millimcp bench "python server.py --stdio" --tool echo ...    # stdio: one quoted command
    millimcp bench --tool echo -- python server.py --stdio       # stdio: the argv after --

A TARGET that starts with ``http://`` or ``https://`` is an HTTP endpoint; anything else is a
command line, split like a shell does (``shlex``; no shell runs it) and started as a
subprocess speaking MCP on its stdin/stdout, with this process's environment and working
directory. Everything after the first ``--`` is taken verbatim as the command (then TARGET
is left out), which is the way to pass a command whose own options would clash with the
lab's.

Options shared by the lab commands (:func:`add_target_arguments`): ``-H/--header`` (HTTP,
repeatable), ``--era auto|modern|handshake`` (``auto`` probes ``server/discover`` and falls
back to ``initialize``), ``--timeout`` (seconds per call), ``--insecure`` (HTTPS without
certificate checks).

:func:`connect` opens a :class:`millimcp.Client` (era detection, ``initialize`` and the
session in the handshake era) and keeps it open while the lab works; over HTTP,
:meth:`Connection.call_template` captures the exact request the Client sends for a tool call,
so a load generator can resend it from pre-serialized bytes.
"""

from __future__ import annotations

import argparse
import shlex
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

import msgspec

from millimcp.errors import ConfigurationError

if TYPE_CHECKING:
    import asyncio

    from millimcp.client import Client, ToolResult
    from millimcp.client.link import Attachment, Link, OnMessage, Reply
    from millimcp.protocol import Message

__all__ = [
    "CallTemplate",
    "Connection",
    "Target",
    "add_call_arguments",
    "add_target_arguments",
    "connect",
    "parse_target",
    "target_from_args",
]

CLIENT_NAME: Final = "millimcp-lab"
_ID_PREFIX: Final = b'{"jsonrpc":"2.0","id":'
_SKIPPED_HEADERS: Final = frozenset({"host", "content-length", "accept-encoding", "connection"})


@dataclass(frozen=True, slots=True)
class Target:
    """Where the server is: an HTTP endpoint or a command to start."""

    kind: Literal["http", "stdio"]
    url: str | None = None
    command: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    insecure: bool = False

    def __str__(self) -> str:
        return self.url if self.url is not None else shlex.join(self.command)


def parse_target(
    text: str | None,
    command: Sequence[str] = (),
    *,
    headers: Mapping[str, str] | None = None,
    insecure: bool = False,
) -> Target:
    """A :class:`Target` from TARGET (``text``) or the argv given after ``--`` (``command``).

    Raises :class:`~millimcp.errors.ConfigurationError` when both or neither are given, for
    an HTTP URL without a host, or for an empty command.
    """
    if command and text:
        raise ConfigurationError(
            f"give TARGET ({text!r}) or a command after --, not both ({shlex.join(command)!r})"
        )
    if command:
        return Target("stdio", command=tuple(command))
    if not text or not text.strip():
        raise ConfigurationError("no TARGET: give a URL, a quoted command, or -- COMMAND...")
    if text.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if not parts.hostname:
            raise ConfigurationError(f"TARGET {text!r} has no host")
        return Target("http", url=text, headers=dict(headers or {}), insecure=insecure)
    if "://" in text.split()[0]:
        raise ConfigurationError(f"TARGET {text!r}: only http:// and https:// URLs are served")
    argv = shlex.split(text)
    if not argv:
        raise ConfigurationError("TARGET is an empty command")
    return Target("stdio", command=tuple(argv))


def add_call_arguments(parser: argparse.ArgumentParser) -> None:
    """TARGET, how to reach it, and the one call to make (``--tool``, ``--args``): what bench
    and profile share."""
    add_target_arguments(parser)
    parser.add_argument("--tool", required=True, help="the tool to call")
    parser.add_argument(
        "--args", default="{}", metavar="JSON", help="the tool's arguments (a JSON object)"
    )


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """TARGET and the options that say how to reach it (see the module docstring)."""
    parser.add_argument(
        "target",
        nargs="?",
        metavar="TARGET",
        help="http(s):// URL of a Streamable HTTP endpoint, or a quoted stdio command "
        "(or give the command after --)",
    )
    parser.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an extra HTTP header on every request (repeatable)",
    )
    parser.add_argument(
        "--era",
        choices=("auto", "modern", "handshake"),
        default="auto",
        help="protocol era: auto (probe server/discover, fall back to initialize), or forced",
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="per-call timeout (seconds)"
    )
    parser.add_argument(
        "--insecure", action="store_true", help="https: do not verify the server's certificate"
    )


def target_from_args(args: argparse.Namespace) -> Target:
    """The :class:`Target` that :func:`add_target_arguments`' options describe."""
    headers: dict[str, str] = {}
    for line in args.header:
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or "\r" in line or "\n" in line:
            raise ConfigurationError(f"--header {line!r} is not 'Name: value'")
        headers[name.strip()] = value.strip()
    return parse_target(
        args.target,
        getattr(args, "command_argv", ()) or (),
        headers=headers,
        insecure=args.insecure,
    )


# -- the captured request --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallTemplate:
    """One HTTP request as the millimcp Client sent it, ready to resend with a new id.

    ``headers`` are every header but ``Host``, ``Content-Length``, ``Connection`` and
    ``Accept-Encoding`` (replies are asked for uncompressed); the session id is among them in
    the handshake era. The body is ``body_head + <id> + body_tail``; the per-call
    ``_meta.traceparent`` is left out (it would be the same on every call).
    """

    url: str
    host: str
    port: int
    path: str
    tls: bool
    headers: tuple[tuple[str, str], ...]
    body_tail: bytes
    body_head: bytes = _ID_PREFIX

    def body(self, request_id: int) -> bytes:
        return b"%s%d%s" % (self.body_head, request_id, self.body_tail)

    def request_prefix(self) -> bytes:
        """The request line and headers, ending with ``Content-Length: `` (value to follow)."""
        host = self.host if ":" not in self.host else f"[{self.host}]"
        default_port = 443 if self.tls else 80
        lines = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {host}" + ("" if self.port == default_port else f":{self.port}"),
        ]
        lines += [f"{name}: {value}" for name, value in self.headers]
        return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")

    def raw_request(self, request_id: int) -> bytes:
        """The whole HTTP/1.1 request (keep-alive) with ``request_id`` as its JSON-RPC id."""
        body = self.body(request_id)
        return b"%s%d\r\n\r\n%s" % (self.request_prefix(), len(body), body)


def _template(url: str, body: bytes, headers: Mapping[str, str]) -> CallTemplate:
    message = msgspec.json.decode(body)
    if not isinstance(message, dict) or "id" not in message:
        raise ConfigurationError("the captured request is not a JSON-RPC request")
    params = message.get("params")
    if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
        meta = {k: v for k, v in params["_meta"].items() if k != "traceparent"}
        params = {k: v for k, v in params.items() if k != "_meta"}
        if meta:
            params["_meta"] = meta
        message["params"] = params
    rest = {k: v for k, v in message.items() if k not in ("jsonrpc", "id")}
    tail = b"," + msgspec.json.encode(rest)[1:] if rest else b"}"
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return CallTemplate(
        url=url,
        host=parts.hostname or "127.0.0.1",
        port=parts.port or (443 if tls else 80),
        path=path,
        tls=tls,
        headers=tuple((k, v) for k, v in headers.items() if k.lower() not in _SKIPPED_HEADERS),
        body_tail=tail,
    )


class _RecordingLink:
    """A Link that passes everything through and, when asked, keeps the next request."""

    def __init__(self, inner: Link) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.recorded: list[tuple[bytes, dict[str, str]]] | None = None

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def request(
        self,
        request_id: int | str,
        body: bytes,
        *,
        headers: Mapping[str, str],
        on_message: OnMessage,
        attachment: Attachment | None = None,
    ) -> Reply:
        if self.recorded is not None:
            self.recorded.append((body, dict(headers)))
        return await self.inner.request(
            request_id, body, headers=headers, on_message=on_message, attachment=attachment
        )

    async def send(self, body: bytes, *, headers: Mapping[str, str]) -> None:
        await self.inner.send(body, headers=headers)

    def unsolicited(self) -> AsyncIterator[Message]:
        return self.inner.unsolicited()

    @property
    def stream_ready(self) -> asyncio.Event:
        return self.inner.stream_ready

    @property
    def session_id(self) -> str | None:
        return self.inner.session_id

    def reset_session(self) -> None:
        self.inner.reset_session()


# -- the connection ------------------------------------------------------------------------


class Connection:
    """An open :class:`millimcp.Client` on a :class:`Target`, with what it learned."""

    def __init__(self, target: Target, client: Client, link: _RecordingLink | None) -> None:
        self.target = target
        self.client = client
        self._link = link

    @property
    def transport(self) -> Literal["http", "stdio"]:
        return self.target.kind

    @property
    def era(self) -> Literal["modern", "handshake"]:
        return self.client.era or "modern"

    @property
    def protocol_version(self) -> str | None:
        return self.client.protocol_version

    @property
    def server(self) -> str | None:
        """``name/version`` as the server announced itself, or None."""
        info = self.client.server_info
        return None if info is None else f"{info.name}/{info.version}"

    @property
    def session_id(self) -> str | None:
        """The handshake era's ``Mcp-Session-Id`` over HTTP, else None."""
        return None if self._link is None else self._link.session_id

    async def call_template(
        self, tool: str, arguments: Mapping[str, Any] | None
    ) -> tuple[ToolResult, CallTemplate]:
        """Call ``tool`` once through the Client and capture that request (HTTP only).

        Protocol errors raise as they do from :meth:`millimcp.Client.call_tool`.
        """
        link = self._link
        if link is None or self.target.url is None:
            raise ConfigurationError("a request template exists only for HTTP targets")
        link.recorded = []
        try:
            result = await self.client.call_tool(tool, arguments)
            body, headers = link.recorded[-1]
        finally:
            link.recorded = None
        merged = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **self.target.headers,
            **headers,
        }
        if self.session_id is not None:
            merged["Mcp-Session-Id"] = self.session_id
        return result, _template(self.target.url, body, merged)


def ssl_context(target: Target) -> ssl.SSLContext | None:
    """The TLS context for an https target (None for http)."""
    if target.url is None or not target.url.startswith("https://"):
        return None
    context = ssl.create_default_context()
    if target.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


@asynccontextmanager
async def connect(
    target: Target,
    *,
    era: Literal["auto", "modern", "handshake"] = "auto",
    call_timeout: float | None = 30.0,
    max_in_flight: int = 64,
    client_info: tuple[str, str] | None = None,
) -> AsyncIterator[Connection]:
    """An open :class:`Connection` (era found, handshake-era session opened), closed on exit.

    ``call_timeout`` bounds each call (seconds; None: no bound). The Client never retries (a
    lab must see every failure) and admits ``max_in_flight`` calls with a queue as deep again.
    """
    from millimcp.client import Client
    from millimcp.lab.results import millimcp_version
    from millimcp.resilience.policy import Limits, Timeout

    limits = Limits(max_in_flight=max_in_flight, max_queue=max_in_flight)
    time_limit = Timeout(total=call_timeout)
    info = client_info or (CLIENT_NAME, millimcp_version())
    recording: _RecordingLink | None = None
    if target.kind == "http":
        from millimcp.client.http_link import HttpLink

        assert target.url is not None
        context = ssl_context(target)
        recording = _RecordingLink(
            HttpLink(
                target.url,
                limits=limits,
                timeout=time_limit,
                headers=target.headers,
                ssl=False if target.insecure and context is not None else None,
            )
        )
        client = Client(
            recording,
            key=target.url,
            limits=limits,
            timeout=time_limit,
            retry=None,
            era=era,
            client_info=info,
        )
    else:
        client = Client.over_stdio(
            target.command[0],
            target.command[1:],
            limits=limits,
            timeout=time_limit,
            retry=None,
            era=era,
            client_info=info,
        )
    async with client:
        yield Connection(target, client, recording)
