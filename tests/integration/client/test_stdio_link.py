"""The stdio link against real subprocesses: the conformance server and scripted peers."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from millimcp.client.link import Reply
from millimcp.client.stdio_lines import salvage_id
from millimcp.client.stdio_link import StdioLink
from millimcp.client.stdio_process import default_environment
from millimcp.errors import ConnectionLost, FrameTooLarge, NotSent
from millimcp.protocol import Message

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
CONFORMANCE = str(ROOT / "examples" / "conformance_server.py")
RAW_PEER = str(HERE / "raw_stdio_peer.py")
CANCEL_SERVER = str(HERE / "cancel_server.py")
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
NO_HEADERS: dict[str, str] = {}


async def ignore(message: Message) -> None:
    raise AssertionError(f"the stdio link never calls on_message: {message}")


def body(request_id: int | str, method: str, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


async def call(link: StdioLink, request_id: int | str, method: str, params: Any = None) -> Any:
    """Send a request; return its decoded result (fails on an error response)."""
    reply = await link.request(
        request_id, body(request_id, method, params), headers=NO_HEADERS, on_message=ignore
    )
    assert isinstance(reply, Reply)
    assert reply.status == 200
    assert reply.message.id == request_id
    assert not reply.message.error, bytes(reply.message.error)
    return msgspec.json.decode(reply.message.result)


def python_env() -> dict[str, str]:
    """What a Python server needs beyond the default environment: this checkout's path."""
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT)]))
    return {"PYTHONPATH": path}


@pytest.fixture
async def opened() -> AsyncIterator[list[StdioLink]]:
    """Links opened by a test; each is closed afterwards and must leave no process."""
    links: list[StdioLink] = []
    yield links
    for link in links:
        await link.close()
        assert link.returncode is not None, link


async def start(opened: list[StdioLink], *argv: str, **options: Any) -> StdioLink:
    options.setdefault("env", python_env())
    link = StdioLink(sys.executable, list(argv), **options)
    opened.append(link)
    await link.open()
    return link


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


# -- the millimcp conformance server ------------------------------------------------------


async def test_handshake_era_round_trip(opened: list[StdioLink]) -> None:
    link = await start(opened, CONFORMANCE, "--stdio")
    assert link.kind == "stdio"
    assert link.session_id is None
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "stdio-link-tests", "version": "0"},
    }
    result = await call(link, 1, "initialize", hello)
    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"]["name"] == "millimcp-conformance"
    await link.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=NO_HEADERS)
    tools = await call(link, 2, "tools/list", {})
    assert "test_simple_text" in {tool["name"] for tool in tools["tools"]}
    link.reset_session()  # a no-op over stdio
    answer = await call(link, "three", "tools/call", {"name": "test_simple_text"})
    assert answer["content"][0]["text"] == "This is a simple text response for testing."


async def test_modern_request_with_meta(opened: list[StdioLink]) -> None:
    link = await start(opened, CONFORMANCE, "--stdio")
    params = {"name": "test_simple_text", "arguments": {}, "_meta": MODERN_META}
    result = await call(link, 1, "tools/call", params)
    assert result["content"] == [
        {"type": "text", "text": "This is a simple text response for testing."}
    ]


async def test_concurrent_requests_are_matched_by_id(opened: list[StdioLink]) -> None:
    link = await start(opened, CONFORMANCE, "--stdio")

    async def prompt(request_id: int | str, value: str) -> str:
        params = {
            "name": "test_prompt_with_arguments",
            "arguments": {"arg1": value, "arg2": "b"},
            "_meta": MODERN_META,
        }
        result = await call(link, request_id, "prompts/get", params)
        return str(result["messages"][0]["content"]["text"])

    ids: list[int | str] = [*range(20), *(f"s{n}" for n in range(20))]
    texts = await asyncio.gather(*(prompt(rid, f"value-{rid}") for rid in ids))
    for request_id, text in zip(ids, texts, strict=True):
        assert f"arg1='value-{request_id}'" in text


async def test_cancelled_request_is_cancelled_on_the_server(
    opened: list[StdioLink], tmp_path: Path
) -> None:
    link = await start(opened, CANCEL_SERVER)
    marker = tmp_path / "marker"
    params = {"name": "wait_for_cancel", "arguments": {"marker": str(marker)}}
    params["_meta"] = MODERN_META
    waiting = asyncio.ensure_future(
        link.request(7, body(7, "tools/call", params), headers=NO_HEADERS, on_message=ignore)
    )
    await call(link, 8, "ping", {"_meta": MODERN_META})  # the call is running by now
    assert not marker.exists()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    # The server reads the cancellation before this ping, and cancels the tool at once.
    await call(link, 9, "ping", {"_meta": MODERN_META})
    for _ in range(200):
        if marker.exists():
            break
        await asyncio.sleep(0.05)
    assert marker.read_text() == "cancelled"


async def test_close_leaves_no_process(opened: list[StdioLink]) -> None:
    link = await start(opened, CONFORMANCE, "--stdio")
    await call(link, 1, "ping", {"_meta": MODERN_META})
    pid = link.pid
    assert pid is not None
    assert alive(pid)
    await link.close()
    await link.close()  # idempotent
    assert link.returncode == 0  # it stopped on stdin EOF, no signal needed
    assert not alive(pid)
    with pytest.raises(NotSent):
        await call(link, 2, "ping")
    assert [m async for m in link.unsolicited()] == []


# -- scripted peers ---------------------------------------------------------------------------


async def test_cancellation_notice_carries_id_and_reason(opened: list[StdioLink]) -> None:
    link = await start(opened, RAW_PEER)
    first = asyncio.ensure_future(
        link.request("h1", body("h1", "hang"), headers=NO_HEADERS, on_message=ignore)
    )
    second = asyncio.ensure_future(
        link.request(2, body(2, "hang"), headers=NO_HEADERS, on_message=ignore)
    )
    await call(link, 3, "echo", {})
    first.cancel()
    second.cancel("deadline of 2.0 s passed")
    for task in (first, second):
        with pytest.raises(asyncio.CancelledError):
            await task
    await call(link, 4, "echo", {})  # the peer has read both notices by now
    await link.close()
    stderr = link.stderr_tail()
    assert 'cancelled "h1" cancelled by client' in stderr
    assert "cancelled 2 deadline of 2.0 s passed" in stderr


async def test_server_exit_mid_request_is_connection_lost(opened: list[StdioLink]) -> None:
    link = await start(opened, RAW_PEER)
    with pytest.raises(ConnectionLost, match="the server closed its stdout"):
        await call(link, 1, "exit", {"code": 3})
    for _ in range(200):
        if link.returncode is not None and "exiting" in link.stderr_tail():
            break
        await asyncio.sleep(0.05)
    assert link.returncode == 3
    with pytest.raises(NotSent, match="exit status 3") as caught:
        await call(link, 2, "echo", {})
    assert "exiting on request" in str(caught.value)
    with pytest.raises(NotSent):
        await link.send(b'{"jsonrpc":"2.0","method":"x"}', headers=NO_HEADERS)


async def test_every_pending_request_fails_when_the_server_exits(
    opened: list[StdioLink],
) -> None:
    link = await start(opened, RAW_PEER)
    hanging = [
        asyncio.ensure_future(
            link.request(n, body(n, "hang"), headers=NO_HEADERS, on_message=ignore)
        )
        for n in range(5)
    ]
    await call(link, "sync", "echo", {})
    results = await asyncio.gather(
        call(link, "bye", "exit", {"code": 0}), *hanging, return_exceptions=True
    )
    assert all(isinstance(result, ConnectionLost) for result in results), results


@pytest.mark.parametrize("order", ["first", "last"])
async def test_oversized_response_fails_its_request_only(
    opened: list[StdioLink], order: str
) -> None:
    link = await start(opened, RAW_PEER, max_line_bytes=64 * 1024)
    big = call(link, 1, "big", {"size": 300_000, "order": order})
    echo = call(link, 2, "echo", {"n": 2})
    results = await asyncio.gather(big, echo, return_exceptions=True)
    assert isinstance(results[0], FrameTooLarge), results[0]
    assert results[1] == {"params": {"n": 2}}
    assert await call(link, 3, "echo", {}) == {"params": {}}


async def test_oversized_line_without_a_visible_id_is_skipped(opened: list[StdioLink]) -> None:
    link = await start(opened, RAW_PEER, max_line_bytes=64 * 1024)
    result = await call(link, 1, "big", {"size": 300_000, "order": "nested"})
    assert result == {"after": "nested"}
    line_limit = 1024
    small = await start(opened, RAW_PEER, max_line_bytes=line_limit)
    # Lines just over the limit, arriving whole in one read, take the same path.
    assert await call(small, 1, "big", {"size": 100, "order": "first"}) == {"text": "x" * 100}
    with pytest.raises(FrameTooLarge):
        await call(small, 2, "big", {"size": line_limit, "order": "first"})


def test_salvage_id_reads_only_a_top_level_id() -> None:
    assert salvage_id(b'{"jsonrpc":"2.0","id":7,"result":{', b"") == 7
    assert salvage_id(b'{"id":"a\\"b","result":', b"") == 'a"b'
    assert salvage_id(b'{"result":{"id":1', b'xx", "id": -4}') == -4
    assert salvage_id(b'{"result":{"id":1', b'xx", "id": 4}}') is None
    assert salvage_id(b'{"method":"x","params":{"id":1', b'"id":2}}') is None


async def test_invalid_lines_are_skipped(opened: list[StdioLink]) -> None:
    link = await start(opened, RAW_PEER)
    assert await call(link, 1, "garbage") == {"after": "garbage"}
    assert await call(link, 2, "echo", {"still": "here"}) == {"params": {"still": "here"}}


async def test_stderr_noise_does_not_block(opened: list[StdioLink]) -> None:
    tail = 16 * 1024
    link = await start(opened, RAW_PEER, stderr_tail_bytes=tail)
    result = await call(link, 1, "stderr", {"size": 4 * 1024 * 1024})
    assert result["written"] >= 4 * 1024 * 1024
    await call(link, 2, "echo", {})  # stderr has been read up to the noise's end
    assert len(link.stderr_tail()) <= tail
    assert link.stderr_tail().endswith("end of noise\n")


async def test_server_requests_and_answers(opened: list[StdioLink]) -> None:
    link = await start(opened, RAW_PEER)
    inbox = link.unsolicited()
    asking = asyncio.ensure_future(call(link, 1, "ask"))
    request = await anext(inbox)
    assert request.method == "roots/list"
    assert request.id == "s1"
    answer = b'{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}'
    await link.send(answer, headers=NO_HEADERS)
    result = await asking
    assert result == {"answer": {"jsonrpc": "2.0", "id": "s1", "result": {"roots": []}}}


async def test_full_inbox_drops_notifications_never_requests(opened: list[StdioLink]) -> None:
    link = await start(opened, RAW_PEER, max_unsolicited=100)
    assert await call(link, 1, "notify", {"count": 3000, "ask_after": 2500}) == {"sent": 3000}
    queued: list[Message] = []
    inbox = link.unsolicited()
    while len(queued) < 100:
        queued.append(await anext(inbox))
    assert link.dropped_notifications == 2901  # 3,001 messages, 100 kept
    requests = [m for m in queued if m.id is not msgspec.UNSET]
    assert [(m.id, m.method) for m in requests] == [("ask-1", "roots/list")]
    notes = [msgspec.json.decode(m.params)["data"] for m in queued if m.id is msgspec.UNSET]
    assert notes == list(range(2901, 3000))  # the newest ones


async def test_unsolicited_ends_when_stdout_ends(opened: list[StdioLink]) -> None:
    link = await start(opened, RAW_PEER)
    await call(link, 1, "notify", {"count": 3, "ask_after": -1})
    with pytest.raises(ConnectionLost):
        await call(link, 2, "exit", {"code": 0})
    data = [msgspec.json.decode(m.params)["data"] async for m in link.unsolicited()]
    assert data == [0, 1, 2]


async def test_default_environment_only(
    opened: list[StdioLink], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MILLIMCP_TEST_SECRET", "do-not-leak")
    monkeypatch.setenv("BASH_FUNC_x%%", "() { echo; }")
    link = await start(opened, RAW_PEER, env={"GIVEN": "1"})
    names = set((await call(link, 1, "env"))["names"])
    assert "MILLIMCP_TEST_SECRET" not in names
    assert "BASH_FUNC_x%%" not in names
    assert "GIVEN" in names
    assert "PATH" in names
    assert set(default_environment()) <= names


async def test_close_escalates_to_kill_and_takes_children(opened: list[StdioLink]) -> None:
    link = await start(
        opened, RAW_PEER, "--linger", "--ignore-term", "--spawn-child", close_grace_s=0.3
    )
    await call(link, 1, "echo", {})
    child = int(link.stderr_tail().split("child ")[1].split()[0])
    pid = link.pid
    assert pid is not None
    assert alive(child)
    pending = asyncio.ensure_future(call(link, 2, "hang"))
    await call(link, 3, "echo", {})
    await link.close()
    assert link.returncode == -9
    assert not alive(pid)
    with pytest.raises(ConnectionLost, match="closed"):
        await pending
    for _ in range(200):
        if not alive(child):
            break
        await asyncio.sleep(0.05)
    assert not alive(child)


async def test_close_terminates_a_server_that_ignores_eof(opened: list[StdioLink]) -> None:
    link = await start(opened, RAW_PEER, "--linger", close_grace_s=0.3)
    await call(link, 1, "echo", {})
    await link.close()
    assert link.returncode == -15


async def test_start_failures_are_not_sent(tmp_path: Path) -> None:
    missing = StdioLink(str(tmp_path / "no-such-server"), [])
    with pytest.raises(NotSent, match="could not start"):
        await missing.open()
    await missing.close()
    bad_cwd = StdioLink(sys.executable, [RAW_PEER], cwd=str(tmp_path / "nowhere"))
    with pytest.raises(NotSent):
        await bad_cwd.open()
    never_opened = StdioLink(sys.executable, [RAW_PEER])
    with pytest.raises(NotSent, match="not open"):
        await call(never_opened, 1, "echo")
    await never_opened.close()


def test_under_uvloop(tmp_path: Path) -> None:
    """uvloop's subprocess transports differ from asyncio's (classes, callback order)."""
    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> None:
        link = StdioLink(sys.executable, [RAW_PEER, "--linger"], close_grace_s=0.3)
        await link.open()
        try:
            assert (await call(link, 1, "stderr", {"size": 1024 * 1024}))["written"] > 1024 * 1024
            hanging = asyncio.ensure_future(call(link, 2, "hang"))
            await call(link, 3, "echo", {})
            hanging.cancel()
            with pytest.raises(asyncio.CancelledError):
                await hanging
            with pytest.raises(FrameTooLarge):
                await call(link, 4, "big", {"size": 5 * 1024 * 1024, "order": "last"})
            await call(link, 5, "echo", {})
        finally:
            await link.close()
        assert link.returncode == -15
        assert "cancelled 2 cancelled by client" in link.stderr_tail()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(scenario())
