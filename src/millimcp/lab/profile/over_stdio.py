"""Profiling over stdio: the server as an instrumented subprocess
(:mod:`millimcp.lab.timed_stdio`); the server's time includes the pipes."""

from __future__ import annotations

import asyncio
import os
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from millimcp.client import Client
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
from millimcp.lab.stages import CallTimes
from millimcp.lab.timed_stdio import TimedProcess, spawn_timed
from millimcp.protocol import decode_message, encode_notification, encode_request
from millimcp.protocol.jsonrpc import decode_error

__all__ = ["profile_stdio"]


async def _stdio_call(process: TimedProcess, call: Call) -> CallTimes:
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
    failed = decode_reply(line.body, call.era == "modern")
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


async def _stdio_initialize(process: TimedProcess, call: Call) -> None:
    params = {"protocolVersion": call.version, "capabilities": {}, "clientInfo": CLIENT_INFO}
    reply = process.write(encode_request(0, "initialize", params) + b"\n", 0)
    async with asyncio.timeout(call.timeout):
        line = await reply
    message = decode_message(line.body)
    if message.error:
        error = decode_error(message.error)
        raise ProfileError(f"initialize failed: {error.code} {error.message[:300]}")
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
    started = now_iso()
    async with Client.over_stdio(
        command[0], list(command[1:]), env=env, cwd=cwd, era=era, retry=None, timeout=call_timeout
    ) as client:
        tools = await client.list_tools()
        found_era, version, server = facts(client)
    tool_schema(tools, tool)
    meta = modern_meta(version) if found_era == "modern" else None
    call = Call(tool, arguments, found_era, version, {}, meta, call_timeout)
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
            result.cold.append(count(result, {**steps, **times}))
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
                result.warm.append(count(result, times, warm=True))
        result.duration_s = time.perf_counter() - t_start
    finally:
        await process.close()
    return result
