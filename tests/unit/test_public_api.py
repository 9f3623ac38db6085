"""The curated public API of ``millimcp`` and what importing it costs."""

from __future__ import annotations

import inspect
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


def test_import_time_is_measured() -> None:
    """Measured in a fresh interpreter and printed (run with -s to see it); not asserted."""
    code = (
        "import time; t = time.perf_counter(); import millimcp; "
        "print(f'{(time.perf_counter() - t) * 1000:.1f}')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    milliseconds = float(result.stdout.strip())
    print(f"\nimport millimcp: {milliseconds:.1f} ms")
    assert milliseconds > 0
