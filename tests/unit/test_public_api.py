"""The curated public API of ``millimcp`` and what importing it costs."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import types

import millimcp

EXPECTED_ALL = [
    "Cache",
    "CacheConfig",
    "Client",
    "ConfigurationError",
    "Context",
    "HttpConfig",
    "InputRequired",
    "Limits",
    "MillimcpError",
    "ProtocolError",
    "Retry",
    "Server",
    "ServerConfig",
    "SessionConfig",
    "StdioConfig",
    "Timeout",
    "ToolError",
    "ToolResult",
    "content",
]


def test_all_is_exactly_the_curated_list() -> None:
    assert list(millimcp.__all__) == EXPECTED_ALL


def test_every_public_name_resolves() -> None:
    for name in EXPECTED_ALL:
        assert getattr(millimcp, name, None) is not None, name


def test_public_names_are_the_objects_from_their_rooms() -> None:
    from millimcp import cache, client, errors, resilience, server, session
    from millimcp.transports import http

    assert millimcp.Cache is cache.Cache
    assert millimcp.CacheConfig is cache.CacheConfig
    assert millimcp.ConfigurationError is errors.ConfigurationError
    assert millimcp.MillimcpError is errors.MillimcpError
    assert millimcp.ProtocolError is errors.ProtocolError
    assert millimcp.ToolError is errors.ToolError
    assert millimcp.Server is server.Server
    assert millimcp.ServerConfig is server.ServerConfig
    assert millimcp.Context is session.Context
    assert millimcp.InputRequired is session.InputRequired
    assert millimcp.SessionConfig is session.SessionConfig
    assert millimcp.HttpConfig is http.HttpConfig
    assert millimcp.Client is client.Client
    assert millimcp.ToolResult is client.ToolResult
    assert millimcp.Limits is resilience.Limits
    assert millimcp.Retry is resilience.Retry
    assert millimcp.Timeout is resilience.Timeout
    assert isinstance(millimcp.content, types.ModuleType)
    assert millimcp.content.__name__ == "millimcp.server.content"


def test_public_kinds() -> None:
    for name in ("ConfigurationError", "ProtocolError", "ToolError"):
        assert issubclass(getattr(millimcp, name), millimcp.MillimcpError)
    assert issubclass(millimcp.InputRequired, Exception)
    for name in ("Server", "ServerConfig", "Context", "HttpConfig"):
        assert inspect.isclass(getattr(millimcp, name)), name
    for helper in ("text", "image", "audio", "embedded", "link"):
        assert callable(getattr(millimcp.content, helper)), helper


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from millimcp import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(EXPECTED_ALL)


def test_version_is_a_string() -> None:
    assert isinstance(millimcp.__version__, str)
    assert millimcp.__version__.count(".") >= 2


OPTIONAL = (
    "torch",
    "numpy",
    "aiohttp",
    "uvicorn",
    "httptools",
    "granian",
    "redis",
    "cachetools",
    "prometheus_client",
    "opentelemetry",
    "pydantic",
    "zstandard",
    "isal",
    "hdrh",
    "rich",
)
"""The extras' packages: imported on first use, never by importing the API."""


def modules_loaded_by(statement: str) -> list[str]:
    """The modules a fresh interpreter loads to run ``statement``, sorted."""
    code = (
        "import json, sys; before = set(sys.modules); "
        f"{statement}; print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded: list[str] = json.loads(result.stdout)
    return loaded


def test_importing_the_package_loads_only_its_init() -> None:
    """What keeps ``import millimcp`` fast, asserted without a clock: the rooms and every
    dependency wait until a name is first used (PEP 562)."""
    loaded = modules_loaded_by("import millimcp")
    assert [name for name in loaded if name.startswith("millimcp")] == ["millimcp"]
    outside_stdlib = {name.split(".")[0] for name in loaded} - set(sys.stdlib_module_names)
    assert outside_stdlib == {"millimcp"}


def test_the_server_and_client_names_load_no_extra() -> None:
    loaded = {name.split(".")[0] for name in modules_loaded_by("from millimcp import *")}
    assert "msgspec" in loaded  # the one required dependency
    assert loaded.isdisjoint(OPTIONAL), sorted(loaded.intersection(OPTIONAL))
