"""Which HTTP front serves: native by default, ``MILLIMCP_HTTP_FRONT`` or ``http=`` otherwise,
uvicorn for an ASGI app the native front cannot serve (in-process; the servers themselves run
in tests/integration)."""

from __future__ import annotations

from typing import Any

import pytest

from millimcp import Server
from millimcp.cli import main
from millimcp.compat import mcp2
from millimcp.errors import ConfigurationError
from millimcp.server.serve import FRONT_ENV, FRONTS, default_front, front_for
from millimcp.transports.http import StreamableHTTPApp


async def foreign_app(scope: Any, receive: Any, send: Any) -> None:
    """Any ASGI app that is not a millimcp endpoint (a Starlette app, say)."""


@pytest.mark.parametrize("value", [None, "", "  "])
def test_native_is_the_default(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(FRONT_ENV, raising=False)
    else:
        monkeypatch.setenv(FRONT_ENV, value)
    assert default_front() == "native" == FRONTS[0]
    assert front_for(Server("s").asgi(), None) == "native"


def test_the_environment_names_another_front(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FRONT_ENV, " Uvicorn ")
    assert default_front() == "uvicorn"
    assert front_for(Server("s").asgi(), None) == "uvicorn"
    monkeypatch.setenv(FRONT_ENV, "granian")
    assert front_for(foreign_app, None) == "granian"


def test_an_unknown_front_in_the_environment_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(FRONT_ENV, "apache")
    with pytest.raises(ConfigurationError, match="MILLIMCP_HTTP_FRONT='apache'"):
        default_front()


def test_an_app_the_native_front_cannot_serve_goes_to_uvicorn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(FRONT_ENV, raising=False)
    assert front_for(foreign_app, None) == "uvicorn"
    assert front_for("package.module:app", None) == "uvicorn"


def test_the_argument_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FRONT_ENV, "uvicorn")
    assert front_for(Server("s").asgi(), "native") == "native"
    monkeypatch.setenv(FRONT_ENV, "apache")  # not even read
    assert front_for(foreign_app, "uvicorn") == "uvicorn"


def test_the_cli_says_a_bad_environment_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(FRONT_ENV, "apache")
    assert main(["serve", "tests.servers.basic_server:server", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "millimcp: MILLIMCP_HTTP_FRONT='apache' is not an HTTP front: use native, uvicorn, granian"
    ]


def test_the_cli_help_names_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "{native,uvicorn,granian}" in help_text
    assert "(default: native, or $MILLIMCP_HTTP_FRONT)" in help_text


def test_a_compat_server_runs_its_endpoint_app_unless_a_custom_route_needs_starlette(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(FRONT_ENV, raising=False)
    plain = mcp2.MCPServer("plain")
    served = plain._served_app(streamable_http_path="/api/mcp")
    assert isinstance(served, StreamableHTTPApp)  # so the native front serves it
    assert served.config.path == "/api/mcp"
    assert front_for(served, None) == "native"

    routed = mcp2.MCPServer("routed")

    @routed.custom_route("/health", methods=["GET"])
    async def health(request: Any) -> Any:
        raise AssertionError("not called")

    assert front_for(routed._served_app(), None) == "uvicorn"  # a Starlette app


def test_a_protected_server_is_served_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    from millimcp.auth import Principal, ProtectedResource, StaticTokens
    from millimcp.transports.native.server import endpoint_of

    monkeypatch.delenv(FRONT_ENV, raising=False)
    protected = Server(
        "p",
        auth=ProtectedResource(
            resource="http://127.0.0.1/mcp",
            authorization_servers=["http://127.0.0.1/as"],
            verifier=StaticTokens({"t": Principal("alice")}),
        ),
    )
    gate = protected.asgi()
    assert not isinstance(gate, StreamableHTTPApp)  # the ASGI gate, for ASGI servers
    assert front_for(gate, None) == "native"
    served = endpoint_of(gate)
    assert served is not None
    assert served[0] is gate.app
    assert served[1] is gate.core
    assert endpoint_of(foreign_app) is None


def test_the_native_front_refuses_an_app_it_cannot_serve_in_one_line() -> None:
    from millimcp.server.serve import run_app

    with pytest.raises(ConfigurationError) as refused:
        run_app(foreign_app, http="native", port=1)
    assert str(refused.value) == (
        "the native front serves a millimcp endpoint app (server.asgi()), not function: "
        "serve that with an ASGI server (--http uvicorn)"
    )
