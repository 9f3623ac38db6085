"""Stage timings: the trace hook, and the Server-Timing header built from it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest

from millimcp import Cache, HttpConfig, Server, ServerConfig
from millimcp.observe import STAGES, TRACE, Listener, RequestRecord
from tests.servers.inprocess import Caller


def parse_server_timing(value: str) -> dict[str, tuple[float, str | None]]:
    entries: dict[str, tuple[float, str | None]] = {}
    for part in value.split(","):
        name, *params = (p.strip() for p in part.split(";"))
        fields = dict(p.split("=", 1) for p in params)
        entries[name] = (float(fields["dur"]), fields.get("desc", "").strip('"') or None)
    return entries


def timed_server(**config: Any) -> Server:
    server = Server("timed", config=ServerConfig(server_timing=True, **config))

    @server.tool()
    async def slow(ms: int) -> str:
        await asyncio.sleep(ms / 1000)
        return "x" * 5000  # big enough to be compressed

    @server.tool(cache=Cache(ttl=30))
    async def cached(ms: int) -> str:
        await asyncio.sleep(ms / 1000)
        return "cached"

    return server


async def test_server_timing_has_every_stage_and_they_add_up() -> None:
    server = timed_server()
    async with Caller(server.asgi()) as caller:
        response = await caller.post("slow", {"ms": 30}, headers={"accept-encoding": "gzip"})
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    timing = parse_server_timing(response.headers["server-timing"])
    assert list(timing) == [*STAGES, "total"]
    stages = sum(timing[name][0] for name in STAGES)
    total = timing["total"][0]
    # Every stage is printed truncated to 1 us: the sum may differ from the total by that.
    assert abs(stages - total) <= 0.001 * len(STAGES)
    assert timing["handler"][0] >= 29.0
    assert timing["handler"][0] <= total
    assert timing["compress"][0] > 0
    assert all(timing[name][0] >= 0 for name in STAGES)


async def test_the_cache_stage_tells_a_miss_from_a_hit() -> None:
    server = timed_server()
    async with Caller(server.asgi()) as caller:
        miss = await caller.post("cached", {"ms": 20})
        hit = await caller.post("cached", {"ms": 20})
    miss_timing = parse_server_timing(miss.headers["server-timing"])
    hit_timing = parse_server_timing(hit.headers["server-timing"])
    assert miss_timing["cache"][1] == "miss"
    assert miss_timing["handler"][0] >= 19.0
    assert hit_timing["cache"][1] == "hit-l1"
    assert hit_timing["handler"][0] < 19.0  # the tool (a 20 ms sleep) did not run
    assert hit_timing["total"][0] < miss_timing["total"][0]


async def test_server_timing_is_off_by_default() -> None:
    server = Server("untimed")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    async with Caller(server.asgi()) as caller:
        response = await caller.post("echo", {"text": "hi"})
    assert response.status_code == 200
    assert "server-timing" not in response.headers


async def test_http_config_turns_it_on_for_one_app() -> None:
    server = Server("timed-by-http")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    app = server.asgi(http=HttpConfig(server_timing=True))
    async with Caller(app) as caller:
        response = await caller.post("echo", {"text": "hi"})
    assert re.fullmatch(
        r"decode;dur=\d+\.\d{3}, .*total;dur=\d+\.\d{3}", response.headers["server-timing"]
    )


class Recorder(Listener):
    def __init__(self) -> None:
        self.opened: list[RequestRecord] = []
        self.closed: list[RequestRecord] = []
        self.events: list[tuple[str, tuple[str, ...]]] = []

    def started(self, record: RequestRecord) -> None:
        self.opened.append(record)

    def ended(self, record: RequestRecord) -> None:
        self.closed.append(record)

    def event(self, name: str, labels: tuple[str, ...], value: float) -> None:
        self.events.append((name, labels))


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    listener = Recorder()
    TRACE.add(listener)
    yield listener
    TRACE.remove(listener)


async def test_a_listener_sees_each_request_and_the_events(recorder: Recorder) -> None:
    server = timed_server()
    async with Caller(server.asgi()) as caller:
        await caller.post("cached", {"ms": 1})
        await caller.post("cached", {"ms": 1})
        refused = await caller.client.post(
            caller.url, content=b"{", headers={"content-type": "text/plain"}
        )
    assert refused.status_code == 415
    assert [r.target for r in recorder.closed] == ["cached", "cached"]
    assert recorder.closed[0] is recorder.opened[0]
    assert recorder.closed[0].status == 200
    assert ("cache", ("cached", "miss")) in recorder.events
    assert ("cache", ("cached", "hit-l1")) in recorder.events
    assert ("rejected", ("415",)) in recorder.events


def test_without_listeners_the_hook_is_off() -> None:
    listener = Listener()
    was = TRACE.active
    TRACE.add(listener)
    assert TRACE.active
    TRACE.remove(listener)
    assert TRACE.active == (was and bool(TRACE.listeners))


@pytest.mark.parametrize(
    ("scale", "expected"),
    [  # under 1 ms (the table) and over (formatted); truncated to the microsecond
        (1, [0.041, 0.006, 0.012, 0.004, 0.009, 0, 0.073]),
        (1000, [41.9, 6, 12, 4.999, 9, 0, 73.899]),
    ],
)
def test_the_header_is_the_stages_in_milliseconds(scale: int, expected: list[float]) -> None:
    us = 1000 * scale  # nanoseconds in one "microsecond" of this case
    record = RequestRecord(0, "tools/call", "echo", 1, None, None, 41_900 * scale)
    record.validate_ns, record.cache_ns, record.cache_outcome = 6 * us, 12 * us, "hit-l1"
    record.handled_at = record.handler_start + 22_999 * scale
    record.encoded_at = record.handled_at + 9 * us
    record.sent_at = record.encoded_at
    timing = parse_server_timing(record.server_timing().decode())
    assert list(timing) == [*STAGES, "total"]
    assert [value for value, _ in timing.values()] == pytest.approx(expected)
    assert timing["cache"][1] == "hit-l1"
    assert record.stages() == {
        "decode": 41_900 * scale,
        "validate": 6 * us,
        "cache": 12 * us,
        "handler": 4_999 * scale,
        "encode": 9 * us,
        "compress": 0,
    }
    assert record.total_ns == sum(record.stages().values())
