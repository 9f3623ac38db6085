"""Body reading against hostile clients, in-process through the real ASGI app and the
readers of :mod:`millimcp.transports.body` (over sockets: tests/integration/hardening)."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import MutableMapping, Sequence
from typing import Any

import pytest

from millimcp import HttpConfig, Server
from millimcp.codec.attachment import frame
from millimcp.testing import http_scope, modern_request
from millimcp.transports.body import (
    PREALLOCATE,
    BodyBudget,
    Refusal,
    linger,
    read_more,
    read_writable,
    refuse,
)

Message = dict[str, Any]


class Peer:
    """The client side of one ASGI request: the chunks it sends, what the app sent back."""

    def __init__(self, chunks: Sequence[bytes], stall: bool = False) -> None:
        self.chunks = list(chunks)
        self.stall = stall
        self.received = 0
        self.sent: list[MutableMapping[str, Any]] = []

    async def receive(self) -> Message:
        if not self.chunks:
            if self.stall:
                await asyncio.sleep(3600)
            return {"type": "http.disconnect"}
        chunk = self.chunks.pop(0)
        self.received += 1
        return {"type": "http.request", "body": chunk, "more_body": bool(self.chunks) or self.stall}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])


def server() -> Server:
    made = Server("limits")

    @made.tool()
    async def echo(text: str) -> str:
        return text

    return made


CONFIG = HttpConfig(body_timeout_s=0.2, body_min_rate=0, linger_s=0.5)


async def test_read_more_joins_the_chunks_and_counts_them() -> None:
    budget = BodyBudget(100)
    peer = Peer([b"bc", b"d"])
    body = await read_more(peer.receive, b"a", 10, budget, CONFIG)
    assert body == b"abcd"
    assert budget.held == 4  # until the caller gives them back


@pytest.mark.parametrize(
    ("limit", "budget_limit", "status", "pending"),
    [(3, 100, 413, True), (100, 3, 503, True), (4, 100, 413, False)],
    ids=["413", "503", "413-at-the-end"],
)
async def test_read_more_refuses(limit: int, budget_limit: int, status: int, pending: bool) -> None:
    budget = BodyBudget(budget_limit)
    chunks = [b"bb", b"cc", b"dd"] if pending else [b"bb", b"cc"]
    refusal = await read_more(Peer(chunks).receive, b"a", limit, budget, CONFIG)
    assert isinstance(refusal, Refusal)
    assert (refusal.status, refusal.pending) == (status, pending)
    assert refusal.retry_after is (status == 503)
    assert budget.held == 0


async def test_read_more_times_a_stalled_body_out() -> None:
    budget = BodyBudget(100)
    refusal = await read_more(Peer([b"b"], stall=True).receive, b"a", 100, budget, CONFIG)
    assert isinstance(refusal, Refusal)
    assert refusal.status == 408
    assert budget.held == 0


async def test_a_body_at_the_minimum_rate_is_not_cut() -> None:
    """Past ``body_timeout_s``, a body that keeps ``body_min_rate`` goes on."""

    class Steady(Peer):
        async def receive(self) -> Message:
            await asyncio.sleep(0.05)
            return await super().receive()

    config = HttpConfig(body_timeout_s=0.1, body_min_rate=1)
    peer = Steady([b"x"] * 6)
    body = await read_more(peer.receive, b"", 100, BodyBudget(100), config)
    assert body == b"x" * 6  # 0.3 s in all, three times the timeout: the rate allows it


async def test_read_more_of_a_client_that_left() -> None:
    budget = BodyBudget(100)
    assert await read_more(Peer([]).receive, b"a", 100, budget, CONFIG) == b""
    assert budget.held == 0


async def test_a_declared_size_allocates_nothing_ahead_of_the_bytes() -> None:
    """Declared 60 MB, sent 1 KiB: the buffer holds what came, not what was declared."""
    declared = 60 * 1024 * 1024
    tracemalloc.start()
    try:
        peer = Peer([b"x" * 1024], stall=True)
        result = await read_writable(peer.receive, declared, declared, BodyBudget(declared), CONFIG)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(result, Refusal)
    assert result.status == 408
    assert peak < 2 * PREALLOCATE


async def test_read_writable_grows_past_the_preallocation() -> None:
    chunks = [b"a" * 700_000, b"b" * 700_000, b"c" * 10]
    budget = BodyBudget(10**7)
    body = await read_writable(Peer(chunks).receive, 10**7, 1_400_010, budget, CONFIG)
    assert isinstance(body, bytearray)
    assert bytes(body) == b"".join(chunks)
    assert budget.held == len(body)
    small = await read_writable(Peer([b"ab"]).receive, 10, 5, BodyBudget(10), CONFIG)
    assert small == bytearray(b"ab")  # shorter than declared: trimmed


@pytest.mark.parametrize(("limit", "budget_limit", "status"), [(3, 100, 413), (100, 3, 503)])
async def test_read_writable_refuses(limit: int, budget_limit: int, status: int) -> None:
    budget = BodyBudget(budget_limit)
    refusal = await read_writable(Peer([b"ab", b"cd"]).receive, limit, None, budget, CONFIG)
    assert isinstance(refusal, Refusal)
    assert refusal.status == status
    assert budget.held == 0
    assert await read_writable(Peer([]).receive, 3, None, budget, CONFIG) == bytearray()


async def test_refusal_drains_the_rest_then_ends() -> None:
    peer = Peer([b"x" * 10] * 5)
    headers = {b"content-length": b"50"}
    await refuse(peer.receive, peer.send, 413, "too big", headers, config=CONFIG)
    assert peer.status == 413
    assert peer.received == 5  # the whole body was read and dropped
    assert b"connection" not in peer.headers  # fully drained: the connection can go on
    assert peer.sent[-1] == {"type": "http.response.body", "body": b""}


async def test_refusal_of_a_body_past_the_linger_bound_closes() -> None:
    config = HttpConfig(linger_bytes=20, linger_s=1.0)
    peer = Peer([b"x" * 10] * 10)
    headers = {b"content-length": b"100"}
    await refuse(peer.receive, peer.send, 413, "too big", headers, config=config)
    assert peer.headers[b"connection"] == b"close"
    assert peer.received == 3  # 20 bytes to drop, then it stops


async def test_linger_stops_at_its_time_bound() -> None:
    assert not await linger(Peer([b"x", b"y"], stall=True).receive, CONFIG)
    assert await linger(Peer([b"x", b"y"]).receive, CONFIG)


async def test_refusal_without_a_body_or_with_expect_continue_reads_nothing() -> None:
    for headers in (
        {},
        {b"content-length": b"0"},
        {b"content-length": b"9", b"expect": b"100-continue"},
    ):
        peer = Peer([b"x" * 9])
        await refuse(peer.receive, peer.send, 415, "no", headers, config=CONFIG, retry_after=True)
        assert peer.received == 0
        assert peer.headers[b"retry-after"] == b"1"
        assert (b"expect" in headers) is (peer.headers.get(b"connection") == b"close")


def call_scope(extra: list[tuple[bytes, bytes]] | None = None, **options: Any) -> dict[str, Any]:
    _, headers = modern_request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    mcp = [(k.encode(), v.encode()) for k, v in headers.items() if k.startswith("mcp-")]
    return http_scope([*mcp, *(extra or [])], **options)


def echo_body() -> bytes:
    return modern_request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})[0]


async def test_app_serves_a_chunked_body_and_gives_its_bytes_back() -> None:
    app = server().asgi(http=CONFIG)
    body = echo_body()
    peer = Peer([body[:10], body[10:]])
    await app(call_scope(), peer.receive, peer.send)
    assert peer.status == 200, peer.body
    assert b'"hi"' in peer.body
    assert app.budget.held == 0


async def test_app_refuses_a_chunked_body_past_the_limit_and_drains_it() -> None:
    app = server().asgi(http=HttpConfig(max_body_bytes=100, linger_s=1.0))
    peer = Peer([b"x" * 60] * 5)
    await app(call_scope([(b"transfer-encoding", b"chunked")]), peer.receive, peer.send)
    assert peer.status == 413
    assert peer.received == 5
    assert app.budget.held == 0


async def test_app_refuses_a_declared_size_past_the_limit_and_drains_it() -> None:
    app = server().asgi(http=HttpConfig(max_body_bytes=100, linger_s=1.0))
    peer = Peer([b"x" * 100] * 3)
    await app(call_scope([(b"content-length", b"300")]), peer.receive, peer.send)
    assert peer.status == 413
    assert peer.received == 3


async def test_app_refuses_a_bad_content_type_and_drains_the_body() -> None:
    app = server().asgi(http=CONFIG)
    extra = [(b"content-type", b"text/plain"), (b"content-length", b"30")]
    peer = Peer([b"x" * 10] * 3)
    await app(call_scope(extra), peer.receive, peer.send)
    assert peer.status == 415
    assert peer.received == 3


async def test_app_decodes_a_chunked_compressed_body() -> None:
    import gzip

    app = server().asgi(http=CONFIG)
    packed = gzip.compress(echo_body())
    peer = Peer([packed[:5], packed[5:]])
    await app(call_scope([(b"content-encoding", b"gzip")]), peer.receive, peer.send)
    assert peer.status == 200, peer.body
    bomb = gzip.compress(b" " * (5 * 1024 * 1024))
    peer = Peer([bomb[:5], bomb[5:]])
    await app(call_scope([(b"content-encoding", b"gzip")]), peer.receive, peer.send)
    assert peer.status == 413
    peer = Peer([b"ab", b"cd"])
    await app(call_scope([(b"content-encoding", b"br")]), peer.receive, peer.send)
    assert peer.status == 415
    assert app.budget.held == 0


async def test_framed_body_over_the_budget_gets_503_with_retry_after() -> None:
    app = server().asgi(http=HttpConfig(max_body_bytes_in_flight=1000, linger_s=1.0))
    parts = frame(echo_body(), [b"\0" * 2000])
    body = b"".join(bytes(p) for p in parts)
    peer = Peer([body[:500], body[500:1500], body[1500:]])
    extra = [(b"content-type", app_media_type())]
    await app(call_scope(extra), peer.receive, peer.send)
    assert peer.status == 503
    assert peer.headers[b"retry-after"] == b"1"
    assert peer.received == 3  # the rest was drained
    assert app.budget.held == 0


def app_media_type() -> bytes:
    from millimcp.codec import ATTACHMENT_MEDIA_TYPE

    return ATTACHMENT_MEDIA_TYPE.encode()


async def test_drain_turns_readiness_and_new_work_to_503() -> None:
    made = server()
    ended: list[bool] = []
    app = made.asgi(http=HttpConfig(health_path="/healthz"))
    app.on_drain.append(lambda: ended.append(True))
    peer = Peer([])
    await app(http_scope(method="GET", path="/healthz"), peer.receive, peer.send)
    assert (peer.status, peer.body) == (200, b"ok\n")
    app.drain()
    app.drain()  # once is enough
    assert ended == [True]
    peer = Peer([])
    await app(http_scope(method="GET", path="/healthz"), peer.receive, peer.send)
    assert peer.status == 503
    peer = Peer([echo_body()])
    await app(call_scope(), peer.receive, peer.send)
    assert peer.status == 503
    assert peer.headers[b"retry-after"] == b"1"
    assert peer.headers[b"connection"] == b"close"
    peer = Peer([])
    await app(http_scope(method="GET"), peer.receive, peer.send)
    assert peer.status == 503
    peer = Peer([])
    await app(http_scope(method="DELETE"), peer.receive, peer.send)
    assert peer.status != 503  # ending a session is still served
