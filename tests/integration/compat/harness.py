"""The differential harness: one server module on its real framework and on millimcp (through
``python -m millimcp.compat run``), both driven by the official ``mcp`` 2.3.0 client, compared
on definitions and on the results of representative calls.

``snapshot()`` records what a client sees: every tool, resource, template and prompt
definition, then each call's content blocks, ``structuredContent``, ``isError``, and errors
raised as JSON-RPC errors (their code). ``DELIBERATE`` lists the differences that are
millimcp's on purpose, each with its reason; ``normalise()`` removes exactly those.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.integration.interop.peers import CLIENT_INFO

HERE = Path(__file__).resolve().parent
SERVERS = HERE / "servers"
ROOT = HERE.parents[2]

DELIBERATE: dict[str, str] = {
    "serverInfo.version": "millimcp reports the server's own version (0.0.0 when none is "
    "given); the SDK reports its package version",
    "_meta.dev.millimcp/timeoutMs": "millimcp advertises an enforced per-tool timeout",
    "unknown tool": "millimcp answers JSON-RPC -32602 for an unknown tool (the spec's rule); "
    "MCPServer returns an isError result",
    "log notifications": "not compared: delivery order against the response differs by "
    "transport, not by content",
}


@dataclass
class Call:
    """One representative call: a method and its parameters."""

    method: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


def real_command(server: Path, python: str | None = None) -> StdioServerParameters:
    """The server module on its own framework."""
    return _stdio([python or sys.executable, str(server)])


def shim_command(server: Path) -> StdioServerParameters:
    """The same module, unmodified, on millimcp."""
    return _stdio([sys.executable, "-m", "millimcp.compat", "run", str(server)])


SERVE = HERE / "serve.py"


def served_command(server: Path, *, shim: bool) -> StdioServerParameters:
    """A module that does not serve itself (``mcp run`` style): its ``mcp`` over stdio."""
    return _stdio([sys.executable, str(SERVE), str(server), "stdio", *(["--shim"] if shim else [])])


def _sample(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A value that satisfies a simple JSON schema (the generated calls' arguments)."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _sample(defs[ref.rsplit("/", 1)[-1]], defs)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return _sample(schema[key][0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "string")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: _sample(props[name], defs) for name in schema.get("required", [])}
    if kind == "array":
        return [_sample(schema.get("items", {}), defs)]
    return {"integer": 3, "number": 1.5, "boolean": True, "null": None}.get(kind, "abc")


def generated_calls(listing: dict[str, Any]) -> list[Call]:
    """One call per tool (required arguments sampled from its input schema), one read per
    static resource, one get per prompt (required arguments as text)."""
    calls = []
    for tool in listing["tools"]:
        schema = tool["inputSchema"]
        calls.append(Call("tools/call", tool["name"], _sample(schema, schema.get("$defs", {}))))
    calls += [Call("resources/read", r["uri"]) for r in listing["resources"]]
    for prompt in listing["prompts"]:
        required = [a["name"] for a in prompt.get("arguments", []) if a.get("required")]
        calls.append(Call("prompts/get", prompt["name"], {name: "abc" for name in required}))
    return calls


def _stdio(argv: list[str]) -> StdioServerParameters:
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONWARNINGS": "ignore"}
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env)


@asynccontextmanager
async def client(target: str | StdioServerParameters, mode: str) -> AsyncIterator[Client]:
    async with Client(
        target, mode=mode, cache=None, client_info=CLIENT_INFO, read_timeout_seconds=60
    ) as connected:
        yield connected


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


async def snapshot(
    target: str | StdioServerParameters,
    mode: str,
    calls: list[Call] | None = None,
    extra: Sequence[Call] = (),
) -> Any:
    """Everything a client sees of the server, as JSON values; ``calls=None``: the calls
    :func:`generated_calls` makes from the listing. ``extra`` calls come after."""
    async with client(target, mode) as peer:
        tools = (await peer.list_tools()).tools
        resources = (await peer.list_resources()).resources
        templates = (await peer.list_resource_templates()).resource_templates
        prompts = (await peer.list_prompts()).prompts
        if calls is None:
            listing = {
                "tools": [_dump(t) for t in tools],
                "resources": [_dump(r) for r in resources],
                "prompts": [_dump(p) for p in prompts],
            }
            calls = generated_calls(listing)
        results: list[Any] = []
        for call in [*calls, *extra]:
            try:
                if call.method == "tools/call":
                    result: Any = await peer.call_tool(call.name, call.arguments)
                elif call.method == "resources/read":
                    result = await peer.read_resource(call.name)
                else:
                    result = await peer.get_prompt(call.name, call.arguments)
                results.append(_dump(result))
            except MCPError as exc:
                results.append({"error": exc.error.code})
    return {
        "tools": sorted((_dump(t) for t in tools), key=lambda t: t["name"]),
        "resources": sorted((_dump(r) for r in resources), key=lambda r: r["uri"]),
        "templates": sorted((_dump(r) for r in templates), key=lambda r: r["uriTemplate"]),
        "prompts": sorted((_dump(p) for p in prompts), key=lambda p: p["name"]),
        "results": results,
    }


def normalise(data: Any) -> Any:
    """``data`` without the deliberate differences (and without empty ``_meta``)."""
    text = json.dumps(data, sort_keys=True)
    value = json.loads(text)
    for tool in value["tools"]:
        meta = tool.get("_meta")
        if meta is not None:
            meta.pop("dev.millimcp/timeoutMs", None)
            if not meta:
                del tool["_meta"]
    for result in value["results"]:
        result.pop("_meta", None)
        result.pop("resultType", None)
    return value


def differences(real: Any, ours: Any, path: str = "") -> list[str]:
    """Where two snapshots differ, one line per leaf."""
    if isinstance(real, dict) and isinstance(ours, dict):
        lines: list[str] = []
        for key in sorted(set(real) | set(ours)):
            lines += differences(real.get(key), ours.get(key), f"{path}.{key}")
        return lines
    if isinstance(real, list) and isinstance(ours, list) and len(real) == len(ours):
        return [
            line
            for i, (a, b) in enumerate(zip(real, ours, strict=True))
            for line in differences(a, b, f"{path}[{i}]")
        ]
    return [] if real == ours else [f"{path}: real {real!r} != millimcp {ours!r}"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(port: int, process: subprocess.Popen[bytes]) -> None:
    """Until something listens on ``port`` (``process`` must stay up meanwhile)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")
