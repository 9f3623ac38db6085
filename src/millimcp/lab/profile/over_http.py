"""Profiling over HTTP: each call on an instrumented connection
(:mod:`millimcp.lab.timed_http`), the server's stages from its ``Server-Timing`` header."""

from __future__ import annotations

import asyncio
import contextlib
import ssl as ssl_module
import time
from collections.abc import Mapping
from typing import Any, Literal

from millimcp.client import Client
from millimcp.codec.compress import available, decompress
from millimcp.errors import MillimcpError
from millimcp.lab.profile.call import (
    CLIENT_INFO,
    Call,
    Profile,
    ProfileError,
    clock,
    count,
    cpu_clock,
    decode_reply,
    facts,
    modern_meta,
    tool_schema,
)
from millimcp.lab.results import now_iso
from millimcp.lab.stages import CallTimes, server_stages
from millimcp.lab.timed_http import (
    Endpoint,
    Exchange,
    TimedConnection,
    default_max_message_bytes,
    open_timed,
)
from millimcp.protocol import (
    decode_message,
    encode_header_value,
    encode_notification,
    encode_request,
)
from millimcp.protocol.header_params import header_params, param_headers
from millimcp.protocol.jsonrpc import decode_error

__all__ = ["profile_http"]


async def _http_call(conn: TimedConnection, call: Call, session: str | None) -> CallTimes:
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
        payload = decompress(payload, coding, call.max_message_bytes)
    failed = decode_reply(payload, call.era == "modern")
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


async def _http_initialize(conn: TimedConnection, call: Call, base: Mapping[str, str]) -> str:
    """A handshake-era session on ``conn``: its id (empty when the server issues none)."""
    params = {
        "protocolVersion": call.version,
        "capabilities": {},
        "clientInfo": CLIENT_INFO,
    }
    exchange = await _http_exchange(
        conn, "POST", base, encode_request(0, "initialize", params), call.timeout, 0
    )
    if exchange.status >= 300:
        raise ProfileError(f"initialize: HTTP {exchange.status}: {exchange.body[:300]!r}")
    body = exchange.body
    coding = exchange.headers.get("content-encoding")
    if coding and not exchange.sse:
        body = decompress(body, coding, call.max_message_bytes)
    message = decode_message(body)
    if message.error:
        error = decode_error(message.error)
        raise ProfileError(f"initialize failed: {error.code} {error.message[:300]}")
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
    conn: TimedConnection, call: Call, base: Mapping[str, str], session: str
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
    limit = default_max_message_bytes()  # the Client's: raises MissingExtra without aiohttp
    endpoint = Endpoint.parse(url)
    user = dict(headers or {})
    started = now_iso()
    async with Client.over_http(
        url, era=era, headers=user, ssl=ssl, retry=None, timeout=call_timeout
    ) as client:
        tools = await client.list_tools()
        found_era, version, server = facts(client)
    schema = tool_schema(tools, tool)
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
        meta = modern_meta(version)
    call = Call(tool, arguments, found_era, version, {**base, **mcp}, meta, call_timeout, limit)
    result = Profile(url, "http", found_era, version, server, tool, arguments, started_at=started)

    for _ in range(cold):
        conn, steps = await open_timed(
            endpoint, ssl=ssl, max_message_bytes=limit, connect_timeout=call_timeout
        )
        session = ""
        try:
            if found_era == "handshake":
                t0 = clock()
                session = await _http_initialize(conn, call, base)
                steps["initialize"] = clock() - t0
            times = await _http_call(conn, call, session or None)
            result.cold.append(count(result, {**steps, **times}))
            await _http_end_session(conn, call, base, session)
        finally:
            conn.close()

    conn, _ = await open_timed(
        endpoint, ssl=ssl, max_message_bytes=limit, connect_timeout=call_timeout
    )
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
                conn, steps = await open_timed(
                    endpoint, ssl=ssl, max_message_bytes=limit, connect_timeout=call_timeout
                )
                result.reconnects += i >= warmup
            times = await _http_call(conn, call, session or None)
            if i >= warmup:
                result.warm.append(count(result, {**steps, **times}, warm=True))
        result.duration_s = time.perf_counter() - t_start
        await _http_end_session(conn, call, base, session)
    finally:
        conn.close()
    result.server_timing = any("network/wait" in times for times in result.warm)
    return result
