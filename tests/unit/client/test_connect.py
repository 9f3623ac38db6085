"""``millimcp.testing.connect``: the server's lifespan around an in-memory client, both
eras; the example of docs/testing.md runs as written; a mounted app over the same link."""

from __future__ import annotations

import contextlib
import inspect
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from millimcp import Client, Server
from millimcp.client.asgi_link import AsgiLink
from millimcp.errors import MissingExtra
from millimcp.testing import connect
from tests.unit.client.conftest import Era

DOCS = Path(__file__).resolve().parents[3] / "docs" / "testing.md"


async def test_the_lifespan_runs_around_the_connection(era: Era) -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[None]:
        events.append("up")
        yield
        events.append("down")

    server = Server("lived", lifespan=lifespan)

    @server.tool()
    async def state() -> str:
        return ",".join(events)

    async with connect(server, era=era) as client:
        assert client.era == era
        assert (await client.call_tool("state")).text == "up"
        assert events == ["up"]
    assert events == ["up", "down"]
    async with connect(server, era=era) as client:  # once more: a server serves many tests
        assert (await client.call_tool("state")).text == "up,down,up"


async def test_the_client_is_closed_on_exit(era: Era) -> None:
    server = Server("closing")
    async with connect(server, era=era) as client:
        link: Any = client._core.link
        assert isinstance(link, AsgiLink)
        if era == "handshake":
            assert link.session_id is not None
    assert link.session_id is None  # the session was deleted
    assert not link._calls  # no call of the app is left running


async def test_the_docs_example_runs_as_written() -> None:
    text = DOCS.read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    namespace: dict[str, Any] = {"__name__": "docs_testing_example"}
    exec(compile(code, str(DOCS), "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert len(tests) == 4
    for era in ("modern", "handshake"):
        for test in tests:
            assert inspect.iscoroutinefunction(test)
            await test(era)


async def test_a_mounted_app_is_reached_at_its_full_path() -> None:
    server = Server("mounted")

    @server.tool()
    async def where() -> str:
        return "inside"

    app = Starlette(routes=[Mount("/api", app=server.asgi())])
    async with server.running():
        link = AsgiLink(app, path="/api/mcp")
        async with Client(link, key="memory:mounted") as client:
            assert client.era == "modern"
            assert (await client.call_tool("where")).text == "inside"


@pytest.mark.parametrize(
    ("http", "package", "modules"),
    [
        ("aiohttp", "aiohttp", ["millimcp.client.http_link", "millimcp.client.http_body"]),
        (
            "native",
            "httptools",
            [
                "millimcp.client.native",
                "millimcp.client.native.link",
                "millimcp.client.native.connection",
            ],
        ),
    ],
)
def test_over_http_without_its_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
    http: Literal["native", "aiohttp"],
    package: str,
    modules: list[str],
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # import it: ModuleNotFoundError
    for module in modules:
        monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(MissingExtra) as missing:
        Client.over_http("http://127.0.0.1:1/mcp", http=http)
    assert str(missing.value) == (
        f"Client.over_http needs the 'client' extra ({package} is not installed): "
        "pip install 'millimcp[client]'"
    )


def test_over_http_picks_its_link() -> None:
    from millimcp.client.http_link import HttpLink
    from millimcp.client.native import NativeLink

    assert isinstance(Client.over_http("http://127.0.0.1:1/mcp")._core.link, NativeLink)
    chosen = Client.over_http("http://127.0.0.1:1/mcp", http="aiohttp")
    assert isinstance(chosen._core.link, HttpLink)
    with pytest.raises(ValueError, match="http must be"):
        Client.over_http("http://127.0.0.1:1/mcp", http="curl")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not an http"):
        Client.over_http("ftp://127.0.0.1:1/mcp")
