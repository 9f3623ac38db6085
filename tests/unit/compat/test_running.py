"""Serving a compat server (settings, apps, Host/Origin rules, ``sse``) and the import hook
with ``python -m millimcp.compat run``."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from millimcp.compat import mcp1, mcp2
from millimcp.compat.__main__ import main, run_target
from millimcp.compat.hook import install, uninstall
from millimcp.compat.results import Image
from millimcp.compat.running import SSE_UNSUPPORTED, Settings, http_config
from millimcp.compat.signature import docstring, google_docstring

ROOT = Path(__file__).resolve().parents[3]


def test_transport_security_maps_onto_host_and_origin_checks() -> None:
    settings = Settings()
    assert http_config(settings, "/mcp").allowed_hosts == ("127.0.0.1", "localhost", "[::1]", "::1")
    settings.host = "0.0.0.0"
    assert http_config(settings, "/mcp").allowed_hosts is None
    settings.transport_security = mcp1.TransportSecuritySettings(
        allowed_hosts=["example.com:*", "[::1]:8000"], allowed_origins=["https://app.example"]
    )
    config = http_config(settings, "/mcp")
    assert sorted(config.allowed_hosts or ()) == ["[::1]", "example.com"]
    assert config.allowed_origins == ("https://app.example",)
    settings.transport_security = mcp1.TransportSecuritySettings(
        enable_dns_rebinding_protection=False
    )
    off = http_config(settings, None)
    assert off.allowed_hosts is None
    assert off.allowed_origins == ("*",)


async def test_streamable_http_app_is_starlette_with_custom_routes() -> None:
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse

    server = mcp2.MCPServer("web")

    @server.tool()
    def ping() -> str:
        return "pong"

    @server.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = server.streamable_http_app(streamable_http_path="/api/mcp", json_response=True)
    assert [route.path for route in app.routes] == ["/health", "/api/mcp"]
    assert server.settings.json_response is True
    async with app.router.lifespan_context(app), server.session_manager.run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            assert (await http.get("/health")).text == "ok"
            initialize = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            }
            reply = await http.post(
                "/api/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize},
                headers={"accept": "application/json, text/event-stream"},
            )
            assert reply.status_code == 200, reply.text
            refused = await http.post(
                "/api/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"host": "evil.example", "accept": "application/json"},
            )
            assert refused.status_code == 403


def test_sse_fails_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    server = mcp1.FastMCP("old")
    with pytest.raises(SystemExit) as exited:
        server.run("sse")
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip() == SSE_UNSUPPORTED
    with pytest.raises(ValueError, match="Unknown transport"):
        server.run("carrier-pigeon")


async def test_sse_app_endpoints_answer_501_with_the_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Mounted beside the Streamable HTTP app (as markitdown-mcp --http does), the SSE routes
    answer 501 with the one line and the MCP endpoint keeps serving."""
    server = mcp2.MCPServer("both")
    sse = server.sse_app()
    assert capsys.readouterr().err.strip() == SSE_UNSUPPORTED
    transport = httpx.ASGITransport(app=sse)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        stream = await http.get("/sse")
        posted = await http.post("/messages/", content=b"{}")
    assert (stream.status_code, stream.text) == (501, SSE_UNSUPPORTED)
    assert (posted.status_code, posted.text) == (501, SSE_UNSUPPORTED)


def test_media_and_docstrings() -> None:
    with pytest.raises(ValueError, match="Either path or data"):
        Image()
    assert Image(path="a.JPG")._mime_type == "image/jpeg"
    assert Image(path="a.bin")._mime_type == "application/octet-stream"
    assert docstring(None) == (None, {})
    assert docstring("Just text.") == ("Just text.", {})
    summary, params = google_docstring("Do it.\n\nArgs:\n    a (int): first\n    **kw: rest\n")
    assert summary == "Do it."
    assert params == {"a": "first", "kw": "rest"}
    # with griffe (fastmcp's parser), Sphinx and NumPy styles too, as fastmcp 4 reads them
    assert docstring("Do it.\n\n:param a: first\n:param b: second\n") == (
        "Do it.",
        {"a": "first", "b": "second"},
    )
    assert docstring("Do it.\n\nParameters\n----------\na : int\n    first\n") == (
        "Do it.",
        {"a": "first"},
    )


@pytest.fixture
def hooked() -> Iterator[None]:
    before = dict(sys.modules)
    install()
    try:
        yield
    finally:
        uninstall()
        for name in set(sys.modules) - set(before):
            del sys.modules[name]
        sys.modules.update(before)


def test_the_hook_aliases_the_three_apis(hooked: None) -> None:
    from millimcp.compat import fastmcp
    from millimcp.errors import ToolError

    def name(module: str, attr: str) -> object:
        return getattr(importlib.import_module(module), attr)

    assert name("mcp.server.fastmcp", "FastMCP") is mcp1.FastMCP
    assert name("mcp.server.mcpserver", "MCPServer") is mcp2.MCPServer
    assert name("fastmcp", "FastMCP") is fastmcp.FastMCP
    assert name("fastmcp.exceptions", "ToolError") is ToolError
    assert name("mcp.server.fastmcp.prompts.base", "UserMessage") is mcp1.UserMessage
    assert hasattr(importlib.import_module("mcp.types"), "TextContent")  # the real SDK's


def test_run_target_forms(tmp_path: Path, hooked: None, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "fixture_target.py"
    module.write_text(
        textwrap.dedent(
            """
            import sys
            from mcp.server.fastmcp import FastMCP
            mcp = FastMCP("t")
            def main():
                return len(sys.argv)
            if __name__ == "__main__":
                RAN = sys.argv[1:]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "argv", sys.argv[:])
    assert run_target("fixture_target:main", ["a", "b"]) == 3
    assert run_target(str(module), ["x"])["RAN"] == ["x"]
    assert run_target("fixture_target", [])["RAN"] == []
    with pytest.raises(SystemExit, match="no module or console script"):
        run_target("no_such_module_here", [])
    assert main(["run", "fixture_target:main"]) == 1


def test_python_m_millimcp_compat_run_serves_stdio(tmp_path: Path) -> None:
    """An mcp 1.x server, unmodified, answers over stdio through ``millimcp compat run``."""
    server = tmp_path / "old_server.py"
    server.write_text(
        textwrap.dedent(
            """
            from mcp.server.fastmcp import FastMCP
            mcp = FastMCP("old")
            @mcp.tool()
            def hello(name: str) -> str:
                return f"hello {name}"
            if __name__ == "__main__":
                mcp.run()
            """
        )
    )
    requests = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
        '{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hello",'
        '"arguments":{"name":"Ada"}}}\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "millimcp", "compat", "run", str(server)],
        input=requests,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert '"hello Ada"' in done.stdout, done.stderr
