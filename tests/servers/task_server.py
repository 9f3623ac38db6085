"""A server whose tools run as tasks, for the tasks tests over real HTTP.

``MILLIMCP_TEST_REDIS_URL`` keeps the tasks in Redis (with ``MILLIMCP_TEST_TASK_NS`` as the
key namespace), so that two processes serve the same tasks; ``MILLIMCP_TEST_TASK_TTL_MS``
sets their TTL. Run with ``python -m millimcp serve tests.servers.task_server:server``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from millimcp import Context, Server, ServerConfig
from millimcp.auth import Principal, ProtectedResource, StaticTokens
from millimcp.tasks import TaskConfig


def _auth() -> ProtectedResource | None:
    """``MILLIMCP_TEST_TASK_AUTH=1``: two fixed bearer tokens, for Alice and for Bob."""
    if os.environ.get("MILLIMCP_TEST_TASK_AUTH") != "1":
        return None
    return ProtectedResource(
        resource="http://127.0.0.1/mcp",
        authorization_servers=["http://127.0.0.1/unused-as"],
        verifier=StaticTokens({"token-alice": Principal("alice"), "token-bob": Principal("bob")}),
    )


server = Server(
    "task-server",
    auth=_auth(),
    config=ServerConfig(
        tasks=TaskConfig(
            ttl_ms=int(os.environ.get("MILLIMCP_TEST_TASK_TTL_MS", "60000")),
            poll_interval_ms=20,
            redis_url=os.environ.get("MILLIMCP_TEST_REDIS_URL"),
            namespace=os.environ.get("MILLIMCP_TEST_TASK_NS", "millimcp-test-task"),
        )
    ),
)
stopped = 0
"""Handlers that were stopped by a cancel, in this process."""


@server.tool(task="optional")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds:g} s in pid {os.getpid()}"


@server.tool(task="required")
async def report(rows: int) -> dict[str, Any]:
    await asyncio.sleep(0.1)
    return {"rows": rows, "pid": os.getpid()}


@server.tool(task="optional")
async def stoppable() -> str:
    global stopped
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        stopped += 1
        raise
    return "never stopped"


@server.tool(task="optional")
async def confirm(item: str, ctx: Context) -> str:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = await ctx.elicit(f"Really {item}?", schema, key="ok")
    return f"{item}: {answer.action} {(answer.content or {}).get('ok')} in pid {os.getpid()}"


@server.tool()
async def task_stats() -> dict[str, Any]:
    kept = await server.tasks.store.count()
    return {"stopped": stopped, "kept": kept, "pid": os.getpid()}
