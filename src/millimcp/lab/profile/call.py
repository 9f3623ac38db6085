"""What every profiled call shares: the :class:`Profile` it fills, the request it sends, and
how its reply is read (as the millimcp Client reads it)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from millimcp.errors import MillimcpError
from millimcp.lab.stages import CallTimes
from millimcp.protocol import decode_message, encode_request
from millimcp.protocol.jsonrpc import decode_error
from millimcp.protocol.methods import reply_decoder
from millimcp.protocol.types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    InputRequiredResult,
    narrow_blocks,
)

if TYPE_CHECKING:
    from millimcp.client import Client

__all__ = [
    "CLIENT_INFO",
    "Call",
    "Profile",
    "ProfileError",
    "clock",
    "count",
    "cpu_clock",
    "decode_reply",
    "facts",
    "modern_meta",
    "tool_schema",
]

clock: Final = time.perf_counter_ns
cpu_clock: Final = time.thread_time_ns
CLIENT_INFO: Final = {"name": "millimcp-profile", "version": "0.1.0"}
_CALL: Final = reply_decoder("tools/call")


class ProfileError(MillimcpError):
    """The profile cannot go on: the call failed, or (``usage``) the request is wrong (no
    such tool)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass
class Profile:
    """What a profile measured: each warm and cold call's stages, and the facts of the run."""

    target: str
    transport: Literal["http", "stdio"]
    era: Literal["modern", "handshake"]
    version: str
    server: str | None
    tool: str
    arguments: dict[str, Any]
    warm: list[CallTimes] = field(default_factory=list)
    cold: list[CallTimes] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    started_at: str = ""
    duration_s: float = 0.0
    """Wall time of the measured warm calls."""
    warmup_s: float = 0.0
    reconnects: int = 0
    """Warm calls that needed a new connection (the server closed the previous one)."""
    server_timing: bool = False
    """Whether the server sent ``Server-Timing`` on the warm calls."""
    sse_replies: int = 0
    """Warm replies that came as an SSE stream."""
    failed: set[int] = field(default_factory=set)
    """Indexes of the warm calls whose tool failed (``isError``)."""


def decode_reply(body: bytes, modern: bool) -> bool:
    """Decode a ``tools/call`` response as the Client does; whether the tool failed
    (``isError``). Raises the server's JSON-RPC error."""
    message = decode_message(body)
    if message.error:
        raise decode_error(message.error).exception()
    result = _CALL.decode(message.result, modern)
    if isinstance(result, InputRequiredResult):
        raise ProfileError("the tool asked for input (input_required): not profiled")
    narrow_blocks(result.content)
    return bool(result.is_error)


@dataclass
class Call:
    """Everything that is the same for each call of the profile."""

    tool: str
    arguments: dict[str, Any]
    era: Literal["modern", "handshake"]
    version: str
    headers: dict[str, str]
    """HTTP: the request headers (base, MCP, user); stdio: unused."""
    meta: dict[str, Any] | None
    timeout: float
    max_message_bytes: int = 16 * 1024 * 1024
    """The largest reply read (after decompression too)."""
    ids: int = 0

    def body(self) -> tuple[int, bytes]:
        self.ids += 1
        params: dict[str, Any] = {"name": self.tool, "arguments": self.arguments}
        if self.meta is not None:
            params["_meta"] = self.meta
        return self.ids, encode_request(self.ids, "tools/call", params)


def modern_meta(version: str) -> dict[str, Any]:
    """The ``_meta`` a modern-era request carries."""
    return {
        META_PROTOCOL_VERSION: version,
        META_CLIENT_CAPABILITIES: {},
        META_CLIENT_INFO: CLIENT_INFO,
    }


def facts(client: Client) -> tuple[Literal["modern", "handshake"], str, str | None]:
    """The era, protocol version and ``name/version`` of the server ``client`` found."""
    era = client.era
    version = client.protocol_version
    if era is None or version is None:
        raise ProfileError("the client found no protocol era")
    info = client.server_info
    server = f"{info.name}/{info.version}" if info is not None else None
    return era, version, server


def tool_schema(tools: Sequence[Any], name: str) -> dict[str, Any]:
    """The input schema of tool ``name`` (:class:`ProfileError` when there is none)."""
    for tool in tools:
        if tool.name == name:
            schema = tool.input_schema
            return dict(schema) if isinstance(schema, Mapping) else {}
    names = ", ".join(sorted(tool.name for tool in tools)) or "none"
    raise ProfileError(f"the server has no tool {name!r} (its tools: {names})", usage=True)


def count(result: Profile, times: CallTimes, *, warm: bool = False) -> CallTimes:
    """Take the call's flags out of ``times`` into ``result`` (errors, SSE replies)."""
    if times.pop("_tool_error", None) is not None and warm:
        result.failed.add(len(result.warm))
        result.errors["tool_error"] += 1
    if times.pop("_sse", None) is not None and warm:
        result.sse_replies += 1
    return times
