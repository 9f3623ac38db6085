"""millimcp.server.offload: what may run in a process pool is checked at registration."""

from __future__ import annotations

import pytest

from millimcp import ConfigurationError, Context, Server, ServerConfig


def module_level(n: int) -> int:
    return n


async def module_level_async(n: int) -> int:
    return n


def with_context(n: int, ctx: Context) -> int:
    return n


def test_process_tools_must_be_module_level_sync_functions_without_context() -> None:
    server = Server("offload")
    server.tool(executor="process")(module_level)
    with pytest.raises(ConfigurationError, match="sync function"):
        server.tool(executor="process")(module_level_async)
    with pytest.raises(ConfigurationError, match="cannot take a Context"):
        server.tool(executor="process")(with_context)

    def local(n: int) -> int:
        return n

    with pytest.raises(ConfigurationError, match="module-level"):
        server.tool(executor="process")(local)


def test_the_process_pool_starts_on_first_use_and_stops_with_the_server() -> None:
    server = Server("offload", config=ServerConfig(process_workers=1))
    assert server._processes is None
    pool = server.processes
    assert server.processes is pool
    server.close()
    assert server._processes is None


def test_server_default_timeout_applies_to_tools_without_their_own() -> None:
    server = Server("timeouts", config=ServerConfig(tool_timeout_s=2.5))
    server.tool()(module_level)
    server.tool(name="own", timeout=0.5)(module_level)
    assert server._tools["module_level"].timeout == 2.5
    assert server._tools["own"].meta == {"dev.millimcp/timeoutMs": 500}
