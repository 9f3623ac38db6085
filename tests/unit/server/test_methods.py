"""millimcp.server.methods: the handler table, and what registration changes in it."""

from __future__ import annotations

from typing import Any

import pytest

from millimcp import Context, Server
from millimcp.protocol.types import LegacyEmptyResult, RequestParams, SetLevelParams
from tests.unit.server.asgi_calls import result

METHODS = {
    "server/discover",
    "initialize",
    "ping",
    "logging/setLevel",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
}


def context(session: Any = None) -> Context:
    return Context(request_id=1, method="ping", meta=None, session=session)


def test_the_server_answers_every_method_itself() -> None:
    assert set(Server("table").handlers()) == METHODS


async def test_ping_and_set_level() -> None:
    handlers = Server("table").handlers()
    assert await handlers["ping"](RequestParams(), context()) == LegacyEmptyResult()

    class Session:
        level: str | None = None

        def set_log_level(self, level: str) -> None:
            self.level = level

    session = Session()
    params = SetLevelParams(level="warning")
    assert await handlers["logging/setLevel"](params, context(session)) == LegacyEmptyResult()
    assert session.level == "warning"
    assert await handlers["logging/setLevel"](params, context()) == LegacyEmptyResult()


def test_capabilities_follow_what_is_registered() -> None:
    server = Server("caps")
    empty = server.capabilities()
    assert (empty.tools, empty.resources, empty.prompts, empty.completions) == (
        None,
        None,
        None,
        None,
    )
    assert empty.logging == {}

    @server.tool
    async def t() -> str:
        return ""

    @server.resource("test://{x}")
    async def r(x: str) -> str:
        return x

    @server.prompt
    async def p() -> str:
        return ""

    @server.completion
    def c(ref: Any, argument: Any, context: Any) -> list[str]:
        return []

    full = server.capabilities()
    assert full.tools == {"listChanged": True}
    assert full.resources == {"subscribe": True, "listChanged": True}
    assert full.prompts == {"listChanged": True}
    assert full.completions == {}
    server.remove_tool("t")
    server.remove_resource("test://{x}")
    server.remove_prompt("p")
    after = server.capabilities()
    assert (after.tools, after.resources, after.prompts) == (None, None, None)


async def test_removed_entries_leave_the_lists() -> None:
    server = Server("lists")

    @server.tool
    async def keep() -> str:
        return ""

    @server.tool
    async def drop() -> str:
        return ""

    @server.resource("test://static")
    async def static() -> str:
        return "s"

    @server.resource("test://t/{x}")
    async def templated(x: str) -> str:
        return x

    @server.prompt
    async def gone() -> str:
        return ""

    app = server.asgi()
    assert [t["name"] for t in (await result(app, "tools/list", {}))["tools"]] == ["keep", "drop"]
    server.remove_tool("drop")
    server.remove_resource("test://static")
    server.remove_resource("test://t/{x}")
    server.remove_prompt("gone")
    assert [t["name"] for t in (await result(app, "tools/list", {}))["tools"]] == ["keep"]
    assert (await result(app, "resources/list", {}))["resources"] == []
    assert (await result(app, "resources/templates/list", {}))["resourceTemplates"] == []
    assert (await result(app, "prompts/list", {}))["prompts"] == []
    for remove, key in (
        (server.remove_tool, "drop"),
        (server.remove_prompt, "gone"),
        (server.remove_resource, "test://static"),
    ):
        with pytest.raises(KeyError):
            remove(key)


async def test_registering_a_uri_again_replaces_it() -> None:
    server = Server("again")
    for text in ("one", "two"):

        @server.resource("test://t/{x}", description=text)
        async def templated(x: str) -> str:
            return x

    listed = await result(server.asgi(), "resources/templates/list", {})
    assert [t["description"] for t in listed["resourceTemplates"]] == ["two"]
