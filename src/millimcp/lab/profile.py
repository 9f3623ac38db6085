"""``millimcp profile TARGET --tool NAME --args JSON``: where the time of one call goes.

The client side of each ``tools/call`` is measured on an instrumented connection
(:mod:`millimcp.lab.timed_http`, :mod:`millimcp.lab.timed_stdio`); the server's side comes
from its ``Server-Timing`` header when it sends one (a millimcp server with
``ServerConfig(server_timing=True)`` does: decode, validate, cache, handler, encode,
compress, total). The stages of one HTTP call tile it, end to end:

=================  ===============================================================
dns, connect, tls  a new connection only (the cold calls): ``getaddrinfo``, the TCP
                   connect, the TLS handshake (https)
initialize         a new connection to a handshake-era server: ``initialize`` and
                   ``notifications/initialized`` (a new session)
request encode     the JSON-RPC body and the HTTP head
upload             writing them to the socket (the CPU time of the write when the kernel
                   took it at once: on a loopback the write may wake the server and
                   lose the CPU to it; that wait belongs to the stages after)
server <stage>     the server's own stages (``Server-Timing``)
network/wait       the time to the first response byte minus the server's total:
                   the network both ways, the HTTP server, the event loops
server             without ``Server-Timing``: the whole time to the first byte
download           first byte to last byte of the response (an SSE reply: of the
                   event that answers the request)
client wake-up     from the last byte (seen by the event loop) to the caller running
                   again
response decode    decompression, JSON-RPC and result decoding, as the Client does
=================  ===============================================================

Transport + serialization (S7.1: above 30% the call has room left) is the share of every
stage above but the server's ``validate``, ``cache`` and ``handler`` (and ``server``,
which cannot be split without ``Server-Timing``: the share is then a lower bound).

Over stdio: ``request encode``, ``write`` (to the server's stdin), ``server+pipe`` (until
the first byte of the response line), ``read`` (first to last byte of the line),
``client wake-up``, ``response decode``; a cold call is the first on a new process (``spawn``, and
``initialize`` in the handshake era).

The era is found with :class:`~millimcp.Client` (``server/discover``, else
``initialize``); the calls then carry what that era needs (``_meta`` and the
``MCP-Protocol-Version``/``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*`` headers, or a
session). Warm calls run one at a time on one kept-alive connection (after ``--warmup``
calls that are not counted); each cold call opens a new connection (S2.1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import ssl as ssl_module
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from millimcp.client import Client
from millimcp.codec.compress import available, decompress
from millimcp.errors import ConfigurationError, MillimcpError, error_from_code
from millimcp.lab import _table
from millimcp.lab.loadgen import run_event_loop
from millimcp.lab.stages import (
    SHARE_WARNING,
    CallTimes,
    server_stages,
    stage_order,
    summarize,
    transport_share,
)
from millimcp.lab.target import add_call_arguments, ssl_context, target_from_args
from millimcp.lab.timed_http import Endpoint, Exchange, TimedConnection, open_timed
from millimcp.lab.timed_stdio import TimedProcess, spawn_timed
from millimcp.protocol import (
    decode_message,
    encode_header_value,
    encode_notification,
    encode_request,
)
from millimcp.protocol.header_params import header_params, param_headers
from millimcp.protocol.methods import reply_decoder
from millimcp.protocol.types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    InputRequiredResult,
    narrow_blocks,
)

__all__ = [
    "Profile",
    "ProfileError",
    "add_arguments",
    "heading",
    "notes",
    "profile_http",
    "profile_stdio",
    "render",
    "run",
    "to_run",
]

clock: Final = time.perf_counter_ns
cpu_clock: Final = time.thread_time_ns
_CLIENT_INFO: Final = {"name": "millimcp-profile", "version": "0.1.0"}
_CALL: Final = reply_decoder("tools/call")
_ERROR: Final = msgspec.json.Decoder(dict[str, Any])
_MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024


class ProfileError(MillimcpError):
    """The profile cannot go on: the call failed, or (``usage``) the request is wrong (no
    such tool)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass
class Profile:
    """What a profile measured: each warm and cold call's stages, and the facts of the run."""

    target: str
    transport: Literal["http", "stdio"]
    era: Literal["modern", "handshake"]
    version: str
    server: str | None
    tool: str
    arguments: dict[str, Any]
    warm: list[CallTimes] = field(default_factory=list)
    cold: list[CallTimes] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    started_at: str = ""
    duration_s: float = 0.0
    """Wall time of the measured warm calls."""
    warmup_s: float = 0.0
    reconnects: int = 0
    """Warm calls that needed a new connection (the server closed the previous one)."""
    server_timing: bool = False
    """Whether the server sent ``Server-Timing`` on the warm calls."""
    sse_replies: int = 0
    """Warm replies that came as an SSE stream."""
    failed: set[int] = field(default_factory=set)
    """Indexes of the warm calls whose tool failed (``isError``)."""


# -- the wire ---------------------------------------------------------------------------------


def _decode(body: bytes, modern: bool) -> bool:
    """Decode a ``tools/call`` response as the Client does; whether the tool failed
    (``isError``). Raises the server's JSON-RPC error."""
    message = decode_message(body)
    if message.error:
        error = _ERROR.decode(message.error)
        raise error_from_code(
            int(error.get("code", -32603)), str(error.get("message", "")), error.get("data")
        )
    result = _CALL.decode(message.result, modern)
    if isinstance(result, InputRequiredResult):
        raise ProfileError("the tool asked for input (input_required): not profiled")
    narrow_blocks(result.content)
    return bool(result.is_error)


@dataclass
class _Call:
    """Everything that is the same for each call of the profile."""

    tool: str
    arguments: dict[str, Any]
    era: Literal["modern", "handshake"]
    version: str
    headers: dict[str, str]
    """HTTP: the request headers (base, MCP, user); stdio: unused."""
    meta: dict[str, Any] | None
    timeout: float
    ids: int = 0

    def body(self) -> tuple[int, bytes]:
        self.ids += 1
        params: dict[str, Any] = {"name": self.tool, "arguments": self.arguments}
        if self.meta is not None:
            params["_meta"] = self.meta
        return self.ids, encode_request(self.ids, "tools/call", params)


def _modern_meta(version: str) -> dict[str, Any]:
    return {
        META_PROTOCOL_VERSION: version,
        META_CLIENT_CAPABILITIES: {},
        META_CLIENT_INFO: _CLIENT_INFO,
    }


# -- HTTP -------------------------------------------------------------------------------------


async def _http_call(conn: TimedConnection, call: _Call, session: str | None) -> CallTimes:
    t0 = clock()
    request_id, body = call.body()
    headers = call.headers if session is None else {**call.headers, "Mcp-Session-Id": session}
    data = conn.head("POST", headers, len(body)) + body
    t1 = clock()
    c1 = cpu_clock()
    reply = conn.write(data, request_id=request_id)
    waited = await conn.drain()
    t2 = clock()
    upload = t2 - t1 if waited else min(t2 - t1, cpu_clock() - c1)
    async with asyncio.timeout(call.timeout):
        exchange = await reply
    t3 = clock()
    if exchange.status >= 300 and not exchange.body.startswith(b"{"):
        raise ProfileError(f"HTTP {exchange.status}: {exchange.body[:300]!r}")
    payload = exchange.body
    coding = exchange.headers.get("content-encoding")
    if coding and not exchange.sse:
        payload = decompress(payload, coding, _MAX_MESSAGE_BYTES)
    failed = _decode(payload, call.era == "modern")
    t4 = clock()
    await conn.finish(exchange)
    first = max(exchange.first_byte_ns, t1)
    last = min(max(exchange.last_byte_ns, first), t3)
    upload = min(upload, first - t1)
    server, _ = server_stages(exchange.headers, first - t1 - upload)
    stages: CallTimes = {"request encode": t1 - t0, "upload": upload, **server}
    stages["download"] = last - first
    stages["client wake-up"] = t3 - last
    stages["response decode"] = t4 - t3
    if failed:
        stages["_tool_error"] = 0
    if exchange.sse:
        stages["_sse"] = 0
    return stages


async def _http_exchange(
    conn: TimedConnection,
    verb: str,
    headers: Mapping[str, str],
    body: bytes,
    seconds: float,
    request_id: int | None = None,
) -> Exchange:
    reply = conn.write(conn.head(verb, dict(headers), len(body)) + body, request_id=request_id)
    async with asyncio.timeout(seconds):
        exchange = await reply
        await conn.finish(exchange)
    return exchange


async def _http_initialize(conn: TimedConnection, call: _Call, base: Mapping[str, str]) -> str:
    """A handshake-era session on ``conn``: its id (empty when the server issues none)."""
    params = {
        "protocolVersion": call.version,
        "capabilities": {},
        "clientInfo": _CLIENT_INFO,
    }
    exchange = await _http_exchange(
        conn, "POST", base, encode_request(0, "initialize", params), call.timeout, 0
    )
    if exchange.status >= 300:
        raise ProfileError(f"initialize: HTTP {exchange.status}: {exchange.body[:300]!r}")
    body = exchange.body
    coding = exchange.headers.get("content-encoding")
    if coding and not exchange.sse:
        body = decompress(body, coding, _MAX_MESSAGE_BYTES)
    message = decode_message(body)
    if message.error:
        raise ProfileError(f"initialize failed: {bytes(message.error)[:300]!r}")
    session = exchange.headers.get("mcp-session-id", "")
    headers = {**base, "MCP-Protocol-Version": call.version}
    if session:
        headers["Mcp-Session-Id"] = session
    note = encode_notification("notifications/initialized")
    exchange = await _http_exchange(conn, "POST", headers, note, call.timeout)
    if exchange.status >= 300:
        raise ProfileError(f"notifications/initialized: HTTP {exchange.status}")
    return session


async def _http_end_session(
    conn: TimedConnection, call: _Call, base: Mapping[str, str], session: str
) -> None:
    if not session or not conn.reusable:
        return
    headers = {**base, "MCP-Protocol-Version": call.version, "Mcp-Session-Id": session}
    with contextlib.suppress(MillimcpError, OSError, TimeoutError):
        # a session left behind is forgotten by the server in time
        await _http_exchange(conn, "DELETE", headers, b"", min(call.timeout, 5.0))


async def profile_http(
    url: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    requests: int = 200,
    warmup: int = 20,
    cold: int = 3,
    era: Literal["auto", "modern", "handshake"] = "auto",
    headers: Mapping[str, str] | None = None,
    ssl: ssl_module.SSLContext | None = None,
    call_timeout: float = 30.0,
) -> Profile:
    """Profile ``tools/call`` of ``tool`` at an HTTP(S) endpoint."""
    endpoint = Endpoint.parse(url)
    user = dict(headers or {})
    started = _now()
    async with Client.over_http(
        url, era=era, headers=user, ssl=ssl, retry=None, timeout=call_timeout
    ) as client:
        tools = await client.list_tools()
        found_era, version, server = _facts(client)
    schema = _tool_schema(tools, tool)
    base = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Accept-Encoding": "zstd, gzip" if available("zstd") else "gzip",
        **user,
    }
    mcp: dict[str, str] = {"MCP-Protocol-Version": version}
    meta = None
    if found_era == "modern":
        mcp["Mcp-Method"] = "tools/call"
        mcp["Mcp-Name"] = encode_header_value(tool)
        mcp.update(param_headers(header_params(schema), arguments))
        meta = _modern_meta(version)
    call = _Call(tool, arguments, found_era, version, {**base, **mcp}, meta, call_timeout)
    result = Profile(url, "http", found_era, version, server, tool, arguments, started_at=started)

    for _ in range(cold):
        conn, steps = await open_timed(endpoint, ssl=ssl, connect_timeout=call_timeout)
        session = ""
        try:
            if found_era == "handshake":
                t0 = clock()
                session = await _http_initialize(conn, call, base)
                steps["initialize"] = clock() - t0
            times = await _http_call(conn, call, session or None)
            result.cold.append(_count(result, {**steps, **times}))
            await _http_end_session(conn, call, base, session)
        finally:
            conn.close()

    conn, _ = await open_timed(endpoint, ssl=ssl, connect_timeout=call_timeout)
    session = ""
    try:
        if found_era == "handshake":
            session = await _http_initialize(conn, call, base)
        t_start = time.perf_counter()
        for i in range(warmup + requests):
            if i == warmup:
                result.warmup_s = time.perf_counter() - t_start
                t_start = time.perf_counter()
            steps = {}
            if not conn.reusable:
                conn.close()
                conn, steps = await open_timed(endpoint, ssl=ssl, connect_timeout=call_timeout)
                result.reconnects += i >= warmup
            times = await _http_call(conn, call, session or None)
            if i >= warmup:
                result.warm.append(_count(result, {**steps, **times}, warm=True))
        result.duration_s = time.perf_counter() - t_start
        await _http_end_session(conn, call, base, session)
    finally:
        conn.close()
    result.server_timing = any("network/wait" in times for times in result.warm)
    return result


# -- stdio ------------------------------------------------------------------------------------


async def _stdio_call(process: TimedProcess, call: _Call) -> CallTimes:
    t0 = clock()
    request_id, body = call.body()
    data = body + b"\n"
    t1 = clock()
    c1 = cpu_clock()
    reply = process.write(data, request_id)
    waited = await process.drain()
    t2 = clock()
    write = t2 - t1 if waited else min(t2 - t1, cpu_clock() - c1)
    async with asyncio.timeout(call.timeout):
        line = await reply
    t3 = clock()
    failed = _decode(line.body, call.era == "modern")
    t4 = clock()
    first = max(line.first_byte_ns, t1)
    last = min(max(line.last_byte_ns, first), t3)
    write = min(write, first - t1)
    stages: CallTimes = {
        "request encode": t1 - t0,
        "write": write,
        "server+pipe": first - t1 - write,
        "read": last - first,
        "client wake-up": t3 - last,
        "response decode": t4 - t3,
    }
    if failed:
        stages["_tool_error"] = 0
    return stages


async def _stdio_initialize(process: TimedProcess, call: _Call) -> None:
    params = {"protocolVersion": call.version, "capabilities": {}, "clientInfo": _CLIENT_INFO}
    reply = process.write(encode_request(0, "initialize", params) + b"\n", 0)
    async with asyncio.timeout(call.timeout):
        line = await reply
    message = decode_message(line.body)
    if message.error:
        raise ProfileError(f"initialize failed: {bytes(message.error)[:300]!r}")
    process.notify(encode_notification("notifications/initialized") + b"\n")


async def profile_stdio(
    command: Sequence[str],
    tool: str,
    arguments: dict[str, Any],
    *,
    requests: int = 200,
    warmup: int = 20,
    cold: int = 3,
    era: Literal["auto", "modern", "handshake"] = "auto",
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    call_timeout: float = 30.0,
) -> Profile:
    """Profile ``tools/call`` of ``tool`` on a server run as ``command`` (stdio)."""
    if not command:
        raise ProfileError("no command to run")
    env = dict(os.environ) if env is None else dict(env)
    started = _now()
    async with Client.over_stdio(
        command[0], list(command[1:]), env=env, cwd=cwd, era=era, retry=None, timeout=call_timeout
    ) as client:
        tools = await client.list_tools()
        found_era, version, server = _facts(client)
    _tool_schema(tools, tool)
    meta = _modern_meta(version) if found_era == "modern" else None
    call = _Call(tool, arguments, found_era, version, {}, meta, call_timeout)
    target = shlex.join(command)
    result = Profile(
        target, "stdio", found_era, version, server, tool, arguments, started_at=started
    )

    for _ in range(cold):
        t0 = clock()
        process = await spawn_timed(command, env=env, cwd=cwd)
        try:
            steps = {"spawn": clock() - t0}
            if found_era == "handshake":
                t1 = clock()
                await _stdio_initialize(process, call)
                steps["initialize"] = clock() - t1
            times = await _stdio_call(process, call)
            result.cold.append(_count(result, {**steps, **times}))
        finally:
            await process.close()

    process = await spawn_timed(command, env=env, cwd=cwd)
    try:
        if found_era == "handshake":
            await _stdio_initialize(process, call)
        t_start = time.perf_counter()
        for i in range(warmup + requests):
            if i == warmup:
                result.warmup_s = time.perf_counter() - t_start
                t_start = time.perf_counter()
            times = await _stdio_call(process, call)
            if i >= warmup:
                result.warm.append(_count(result, times, warm=True))
        result.duration_s = time.perf_counter() - t_start
    finally:
        await process.close()
    return result


# -- shared -----------------------------------------------------------------------------------


def _facts(client: Client) -> tuple[Literal["modern", "handshake"], str, str | None]:
    era = client.era
    version = client.protocol_version
    if era is None or version is None:
        raise ProfileError("the client found no protocol era")
    info = client.server_info
    server = f"{info.name}/{info.version}" if info is not None else None
    return era, version, server


def _tool_schema(tools: Sequence[Any], name: str) -> dict[str, Any]:
    for tool in tools:
        if tool.name == name:
            schema = tool.input_schema
            return dict(schema) if isinstance(schema, Mapping) else {}
    names = ", ".join(sorted(tool.name for tool in tools)) or "none"
    raise ProfileError(f"the server has no tool {name!r} (its tools: {names})", usage=True)


def _count(result: Profile, times: CallTimes, *, warm: bool = False) -> CallTimes:
    """Take the call's flags out of ``times`` into ``result`` (errors, SSE replies)."""
    if times.pop("_tool_error", None) is not None and warm:
        result.failed.add(len(result.warm))
        result.errors["tool_error"] += 1
    if times.pop("_sse", None) is not None and warm:
        result.sse_replies += 1
    return times


def _now() -> str:
    from millimcp.lab.results import now_iso

    return now_iso()


# -- output -----------------------------------------------------------------------------------


def render(profile: Profile) -> _table.Table:
    """The stage table: warm mean, p95 and share beside the cold calls' mean."""
    warm, warm_total = summarize(profile.warm)
    cold, cold_total = summarize(profile.cold)
    order = stage_order([*profile.cold, *profile.warm])
    table = _table.Table(
        [
            ("stage", "left"),
            ("mean", "right"),
            ("p95", "right"),
            ("share", "right"),
            (f"cold (mean of {len(profile.cold)})" if profile.cold else "cold", "right"),
            ("cold share", "right"),
        ]
    )
    for name in order:
        w = warm.get(name)
        c = cold.get(name)
        style = "dim" if w is None or w.share < 1.0 else None
        table.add(
            [
                name,
                _table.duration(w.mean_ms) if w else "-",
                _table.duration(w.p95_ms) if w else "-",
                _table.percent(w.share) if w else "-",
                _table.duration(c.mean_ms) if c else "-",
                _table.percent(c.share) if c else "-",
            ],
            style,
        )
    table.add(
        [
            "total",
            _table.duration(warm_total.mean_ms),
            _table.duration(warm_total.p95_ms),
            "100.0%",
            _table.duration(cold_total.mean_ms) if profile.cold else "-",
            "100.0%" if profile.cold else "-",
        ],
        "bold",
        rule=True,
    )
    return table


def notes(profile: Profile) -> list[str]:
    """The lines under the table: transport share (S7.1), cold vs warm (S2.1), caveats."""
    warm, warm_total = summarize(profile.warm)
    cold, cold_total = summarize(profile.cold)
    lines = []
    share = transport_share(warm)
    split = profile.transport == "http" and profile.server_timing
    if split:
        text = f"transport + serialization: {share:.1f}% of the warm call"
    else:
        hidden = "network" if profile.transport == "http" else "pipes"
        text = (
            f"transport + serialization: at least {share:.1f}% of the warm call (the "
            f"server's time includes the {hidden}: it cannot be split without Server-Timing)"
        )
    if share > SHARE_WARNING:
        text += (
            f"\nWARNING: above {SHARE_WARNING:.0f}%: transport and serialization, not the "
            "tool, set this call's latency"
        )
    elif split:
        text += f", under {SHARE_WARNING:.0f}%: the tool's own work dominates"
    lines.append(text)
    if profile.cold and warm_total.mean_ms > 0:
        ratio = cold_total.mean_ms / warm_total.mean_ms
        cold_text = (
            f"cold call: {_table.duration(cold_total.mean_ms)} vs "
            f"{_table.duration(warm_total.mean_ms)} warm ({ratio:.1f}x)"
        )
        if profile.transport == "http":
            setup = [name for name in ("dns", "connect", "tls", "initialize") if name in cold]
            spent = sum(cold[name].mean_ms for name in setup)
            cold_text += (
                f"; {_table.duration(spent)} of it sets the connection up "
                f"({', '.join(setup)}): keep connections alive and reuse them"
            )
        else:
            cold_text += "; a new process, its start-up included: keep the server process running"
        lines.append(cold_text)
    if profile.transport == "http" and not profile.server_timing:
        lines.append(
            "the server sent no Server-Timing: 'server' is the whole time to the first byte"
        )
    if profile.sse_replies:
        lines.append(
            f"{profile.sse_replies} of the warm replies came as SSE streams "
            "(first/last byte: of the event that answers)"
        )
    if profile.reconnects:
        lines.append(
            f"{profile.reconnects} warm calls needed a new connection (the server closed it): "
            "their connect time is in the warm figures"
        )
    if profile.errors:
        kinds = ", ".join(f"{kind}: {count}" for kind, count in profile.errors.items())
        lines.append(f"errors: {kinds}")
    return lines


def heading(profile: Profile) -> str:
    server = f", server {profile.server}" if profile.server else ""
    return (
        f"profile {profile.target}  tools/call {profile.tool}  "
        f"({profile.transport}, {profile.era} era {profile.version}{server})\n"
        f"{len(profile.warm)} warm calls, one at a time on one "
        f"{'kept-alive connection' if profile.transport == 'http' else 'process'}; "
        f"{len(profile.cold)} cold calls, each on a new "
        f"{'connection' if profile.transport == 'http' else 'process'}"
    )


def to_run(profile: Profile) -> Any:
    """The profile as a lab Run (kind ``"profile"``), for ``--export-json``."""
    from millimcp.lab.results import Run, Stage, host_info, latency_summary

    warm, _ = summarize(profile.warm)
    cold, _ = summarize(profile.cold)
    samples = [
        sum(call.values()) / 1e6 for i, call in enumerate(profile.warm) if i not in profile.failed
    ]
    return Run(
        kind="profile",
        started_at=profile.started_at,
        target=profile.target,
        transport=profile.transport,
        era=profile.era,
        server=profile.server,
        tool=profile.tool,
        args=profile.arguments,
        mode="closed",
        concurrency=1,
        rate=None,
        processes=1,
        duration_s=profile.duration_s,
        warmup_s=profile.warmup_s,
        calls=len(samples),
        errors=dict(profile.errors),
        throughput=len(samples) / profile.duration_s if profile.duration_s > 0 else 0.0,
        latency_ms=latency_summary(samples),
        samples_ms=samples,
        stages={
            name: Stage(mean_ms=s.mean_ms, p95_ms=s.p95_ms, share=s.share)
            for name, s in warm.items()
        },
        cold={
            name: Stage(mean_ms=s.mean_ms, p95_ms=s.p95_ms, share=s.share)
            for name, s in cold.items()
        }
        or None,
        host=host_info(),
        notes=notes(profile),
        client="lean",
    )


# -- the command ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_call_arguments(parser)
    parser.add_argument(
        "-n",
        "--requests",
        type=int,
        default=200,
        metavar="N",
        help="warm calls measured (default: %(default)s)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=20,
        metavar="N",
        help="warm calls sent first, not measured (default: %(default)s)",
    )
    parser.add_argument(
        "--cold",
        type=int,
        default=3,
        metavar="N",
        help="calls on a new connection (stdio: process) each (default: %(default)s)",
    )
    parser.add_argument(
        "--export-json", metavar="PATH", help="write the run (a Run file of kind 'profile')"
    )


def run(args: argparse.Namespace) -> int:
    try:
        target = target_from_args(args)
        arguments = json.loads(args.args)
    except ConfigurationError as exc:
        print(f"millimcp profile: {exc}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"millimcp profile: --args is not JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(arguments, dict):
        print("millimcp profile: --args must be a JSON object", file=sys.stderr)
        return 2
    if args.requests < 1 or args.warmup < 0 or args.cold < 0:
        print("millimcp profile: -n must be >= 1, --warmup and --cold >= 0", file=sys.stderr)
        return 2
    options: dict[str, Any] = {
        "requests": args.requests,
        "warmup": args.warmup,
        "cold": args.cold,
        "era": args.era,
        "call_timeout": args.timeout,
    }
    try:
        if target.kind == "http":
            assert target.url is not None
            coroutine = profile_http(
                target.url,
                args.tool,
                arguments,
                headers=target.headers,
                ssl=ssl_context(target),
                **options,
            )
        else:
            coroutine = profile_stdio(target.command, args.tool, arguments, **options)
        profile = run_event_loop(coroutine)
    except ProfileError as exc:
        print(f"millimcp profile: {exc}", file=sys.stderr)
        return 2 if exc.usage else 1
    except (MillimcpError, OSError, TimeoutError) as exc:
        print(f"millimcp profile: the call failed: {exc!r}", file=sys.stderr)
        return 1
    print(heading(profile))
    render(profile).print()
    for line in notes(profile):
        print(line)
    if args.export_json:
        from millimcp.lab.results import save_run

        save_run(to_run(profile), args.export_json)
        print(f"wrote {args.export_json}")
    if len(profile.failed) == len(profile.warm):
        print(
            "millimcp profile: every measured call failed (isError): this profiled the "
            "tool's error path; check --args",
            file=sys.stderr,
        )
        return 1
    return 0
