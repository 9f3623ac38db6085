"""What ``Server(lifespan=...)`` yields reaches every handler as ``ctx.lifespan``.

Served through the app's ASGI lifespan, as under uvicorn, and through ``running()`` (what
``serve_stdio`` enters); before startup and after shutdown it is None.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from millimcp import Context, Server
from millimcp.protocol.types import CompleteArgument, CompletionRef
from tests.unit.server.asgi_calls import lifespan, result


class Database:
    def __init__(self) -> None:
        self.events: list[str] = []

    @property
    def open(self) -> bool:
        return self.events[-1:] == ["opened"]


def serving(db: Database | None) -> Server:
    """A server whose tool, sync tool, resource, template, prompt and completion report what
    ``ctx.lifespan`` is."""

    @contextlib.asynccontextmanager
    async def connected(server: Server) -> AsyncIterator[Database | None]:
        assert db is not None
        db.events.append("opened")
        try:
            yield db
        finally:
            db.events.append("closed")

    server = Server("lifespan", lifespan=None if db is None else connected)

    def seen(ctx: Context) -> str:
        value = ctx.lifespan
        if value is None:
            return "none"
        assert isinstance(value, Database)
        return f"db open={value.open}"

    @server.tool()
    async def tool(ctx: Context) -> str:
        return seen(ctx)

    @server.tool()
    def sync_tool(ctx: Context) -> str:
        return seen(ctx)

    @server.resource("test://db")
    async def resource(ctx: Context) -> str:
        return seen(ctx)

    @server.resource("test://db/{table}")
    def template(table: str, ctx: Context) -> str:
        return f"{table}: {seen(ctx)}"

    @server.prompt()
    async def prompt(ctx: Context) -> str:
        return seen(ctx)

    @server.completion()
    def complete(
        ref: CompletionRef, argument: CompleteArgument, context: dict[str, str], ctx: Context
    ) -> list[str]:
        return [seen(ctx)]

    return server


async def everything_seen(app: Any) -> list[str]:
    """What each kind of handler saw, in the order of :func:`serving`."""
    seen = []
    for name in ("tool", "sync_tool"):
        called = await result(app, "tools/call", {"name": name, "arguments": {}})
        assert called.get("isError") is not True, called
        seen.append(called["content"][0]["text"])
    for uri in ("test://db", "test://db/orders"):
        read = await result(app, "resources/read", {"uri": uri})
        seen.append(read["contents"][0]["text"])
    got = await result(app, "prompts/get", {"name": "prompt"})
    seen.append(got["messages"][0]["content"]["text"])
    completed = await result(
        app,
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "prompt"}, "argument": {"name": "a", "value": ""}},
    )
    seen.append(completed["completion"]["values"][0])
    return seen


OPEN = ["db open=True", "db open=True", "db open=True", "orders: db open=True", "db open=True"]
OPEN.append("db open=True")
NONE = ["none", "none", "none", "orders: none", "none", "none"]


async def test_handlers_read_the_lifespan_value_under_the_asgi_lifespan() -> None:
    db = Database()
    server = serving(db)
    app = server.asgi()
    async with lifespan(app):
        assert db.events == ["opened"]
        assert await everything_seen(app) == OPEN
    assert db.events == ["opened", "closed"]
    assert await everything_seen(app) == NONE  # after shutdown: nothing to hand out
    server.close()


async def test_handlers_read_the_lifespan_value_inside_running() -> None:
    db = Database()
    server = serving(db)
    app = server.asgi()
    assert await everything_seen(app) == NONE  # not started yet
    async with server.running():
        assert await everything_seen(app) == OPEN
    assert await everything_seen(app) == NONE
    server.close()


async def test_without_a_lifespan_it_is_none() -> None:
    server = serving(None)
    app = server.asgi()
    async with lifespan(app):
        assert await everything_seen(app) == NONE
    server.close()
