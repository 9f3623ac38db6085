"""``millimcp profile`` against real servers: millimcp (both eras, Server-Timing on and off,
HTTP, HTTPS and stdio) and the official SDK's ``MCPServer`` (JSON and SSE replies)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from millimcp.lab.profile import Profile, notes, profile_http, profile_stdio, render
from millimcp.lab.results import load_run
from millimcp.lab.stages import SHARE_WARNING, summarize, transport_share
from tests.conftest import ROOT, free_port, start_server, stop_server
from tests.integration.http.test_tls_http2 import Tls

HI = {"text": "hi"}
SERVER_STAGES = [
    "server decode",
    "server validate",
    "server cache",
    "server handler",
    "server encode",
    "server compress",
]
WARM_TIMED = [
    "request encode",
    "upload",
    *SERVER_STAGES,
    "network/wait",
    "download",
    "client wake-up",
    "response decode",
]
WARM_UNTIMED = [
    "request encode",
    "upload",
    "server",
    "download",
    "client wake-up",
    "response decode",
]
WARM_STDIO = ["request encode", "write", "server+pipe", "read", "client wake-up", "response decode"]
SMALL = {"requests": 30, "warmup": 3, "cold": 2}


def serve(*args: str) -> Iterator[str]:
    port = free_port()
    process = start_server([*args, "--port", str(port)], port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


@pytest.fixture(scope="module")
def timed_url() -> Iterator[str]:
    yield from serve("-m", "millimcp", "serve", "tests.integration.lab.profile_servers:timed")


@pytest.fixture(scope="module")
def untimed_url() -> Iterator[str]:
    yield from serve("-m", "millimcp", "serve", "tests.integration.lab.profile_servers:untimed")


@pytest.fixture(scope="module")
def official_json_url() -> Iterator[str]:
    """The official MCPServer, stateless, JSON replies."""
    yield from serve(
        "-m", "uvicorn", "tests.integration.lab.profile_official:app", "--log-level", "warning"
    )


@pytest.fixture(scope="module")
def official_sse_url() -> Iterator[str]:
    """The official MCPServer with sessions and SSE replies (its defaults)."""
    yield from serve("tests/servers/official_server.py")


def check_tiling(profile: Profile) -> None:
    """Each call's stages add up to its duration; the shares to 100%."""
    for calls in (profile.warm, profile.cold):
        stages, total = summarize(calls)
        assert sum(s.mean_ms for s in stages.values()) == pytest.approx(total.mean_ms)
        assert sum(s.share for s in stages.values()) == pytest.approx(100.0)
        for call in calls:
            assert all(ns >= 0 for ns in call.values()), call
            assert sum(call.values()) > 0


def warm_keys(profile: Profile) -> list[str]:
    return list(summarize(profile.warm)[0])


def cold_keys(profile: Profile) -> list[str]:
    return list(summarize(profile.cold)[0])


@pytest.mark.parametrize("era", ["modern", "handshake"])
async def test_millimcp_with_server_timing(timed_url: str, era: str) -> None:
    profile = await profile_http(timed_url, "echo", HI, era=era, **SMALL)  # type: ignore[arg-type]
    assert profile.era == era
    assert profile.server == "profile-timed/1.0.0"
    assert profile.server_timing
    assert len(profile.warm) == 30
    assert len(profile.cold) == 2
    assert warm_keys(profile) == WARM_TIMED
    setup = ["dns", "connect"] + (["initialize"] if era == "handshake" else [])
    assert cold_keys(profile) == setup + WARM_TIMED
    for call in profile.cold:
        assert call["connect"] > 0
        assert call["dns"] > 0
    check_tiling(profile)
    warm, _ = summarize(profile.warm)
    assert warm["server handler"].mean_ms > 0
    # a trivial tool: the transport and the codecs are most of the call
    assert transport_share(warm) > SHARE_WARNING
    lines = "\n".join(notes(profile))
    assert "WARNING: above 30%" in lines
    assert "sets the connection up (dns, connect" in lines
    table = render(profile).plain()
    for stage in ["dns", "connect", *WARM_TIMED, "total"]:
        assert f"\n{stage} " in table


async def test_a_slow_tool_dominates_its_call(timed_url: str) -> None:
    profile = await profile_http(timed_url, "nap", {"ms": 20}, requests=5, warmup=1, cold=0)
    warm, _ = summarize(profile.warm)
    assert warm["server handler"].share > 50
    lines = "\n".join(notes(profile))
    assert "WARNING" not in lines
    assert "the tool's own work dominates" in lines


async def test_tool_errors_are_counted(timed_url: str) -> None:
    profile = await profile_http(timed_url, "refuse", {}, requests=4, warmup=0, cold=1)
    assert profile.errors == {"tool_error": 4}
    assert profile.failed == {0, 1, 2, 3}
    assert "errors: tool_error: 4" in notes(profile)


@pytest.mark.parametrize("era", ["modern", "handshake"])
async def test_millimcp_without_server_timing(untimed_url: str, era: str) -> None:
    profile = await profile_http(untimed_url, "echo", HI, era=era, **SMALL)  # type: ignore[arg-type]
    assert profile.era == era
    assert not profile.server_timing
    assert warm_keys(profile) == WARM_UNTIMED
    assert "connect" in cold_keys(profile)
    check_tiling(profile)
    lines = "\n".join(notes(profile))
    assert "the server sent no Server-Timing" in lines
    assert "at least" in lines


@pytest.mark.interop
@pytest.mark.parametrize("era", ["auto", "handshake"])
async def test_official_server_json(official_json_url: str, era: str) -> None:
    profile = await profile_http(official_json_url, "echo", HI, era=era, **SMALL)  # type: ignore[arg-type]
    assert profile.era == ("modern" if era == "auto" else "handshake")
    assert profile.server == "profile-official/2.3.0"
    assert profile.sse_replies == 0
    assert warm_keys(profile) == WARM_UNTIMED
    assert cold_keys(profile)[:2] == ["dns", "connect"]
    check_tiling(profile)


@pytest.mark.interop
async def test_official_server_sse(official_sse_url: str) -> None:
    """In the handshake era the official server's defaults answer every call with an SSE
    stream (in the modern era it answers with JSON)."""
    profile = await profile_http(official_sse_url, "echo", HI, era="handshake", **SMALL)  # type: ignore[arg-type]
    assert profile.era == "handshake"
    assert profile.server == "official-interop/2.3.0"
    assert profile.sse_replies == 30
    assert profile.reconnects == 0, "each stream is read to its end: the connection is reused"
    assert warm_keys(profile) == WARM_UNTIMED
    assert cold_keys(profile)[:3] == ["dns", "connect", "initialize"]
    check_tiling(profile)
    assert "30 of the warm replies came as SSE streams" in "\n".join(notes(profile))
    modern = await profile_http(official_sse_url, "echo", HI, requests=5, warmup=0, cold=0)
    assert modern.era == "modern"
    assert modern.sse_replies == 0


async def test_https_has_a_tls_stage(tmp_path: Path) -> None:
    tls = Tls(tmp_path)
    port = free_port()
    process = start_server(
        [
            "-m",
            "millimcp",
            "serve",
            "tests.integration.lab.profile_servers:timed",
            "--port",
            str(port),
            "--certfile",
            str(tls.certfile),
            "--keyfile",
            str(tls.keyfile),
        ],
        port,
    )
    try:
        url = f"https://127.0.0.1:{port}/mcp"
        profile = await profile_http(
            url, "echo", HI, ssl=tls.context, requests=10, warmup=1, cold=1
        )
    finally:
        stop_server(process)
    assert cold_keys(profile)[:3] == ["dns", "connect", "tls"]
    assert profile.cold[0]["tls"] > 0
    assert warm_keys(profile) == WARM_TIMED
    check_tiling(profile)


def stdio_server() -> list[str]:
    return [
        sys.executable,
        "-m",
        "millimcp",
        "serve",
        "tests.integration.lab.profile_servers:timed",
        "--stdio",
    ]


@pytest.mark.parametrize("era", ["modern", "handshake"])
async def test_stdio(era: Literal["modern", "handshake"]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    profile = await profile_stdio(
        stdio_server(), "echo", HI, era=era, env=env, cwd=str(ROOT), requests=30, warmup=3, cold=1
    )
    assert profile.transport == "stdio"
    assert profile.era == era
    assert warm_keys(profile) == WARM_STDIO
    setup = ["spawn"] + (["initialize"] if era == "handshake" else [])
    assert cold_keys(profile) == setup + WARM_STDIO
    check_tiling(profile)
    lines = "\n".join(notes(profile))
    assert "includes the pipes" in lines
    assert "a new process, its start-up included" in lines


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "millimcp", "profile", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def test_cli_table_and_run_file(timed_url: str, tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    args = ["--tool", "echo", "--args", '{"text": "hi"}', "-n", "20", "--warmup", "2"]
    result = run_cli(timed_url, *args, "--cold", "1", "--export-json", str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "tools/call echo" in out
    assert "server handler" in out
    assert "network/wait" in out
    assert "WARNING: above 30%" in out
    run = load_run(path)
    assert run.kind == "profile"
    assert run.tool == "echo"
    assert run.args == HI
    assert run.calls == 20
    assert len(run.samples_ms) == 20
    assert run.stages is not None
    assert list(run.stages) == WARM_TIMED
    assert sum(stage.share for stage in run.stages.values()) == pytest.approx(100.0)
    assert run.cold is not None
    assert "connect" in run.cold
    assert run.latency_ms["p50"] > 0


@pytest.mark.interop
def test_cli_over_stdio_after_double_dash() -> None:
    """The official server over stdio, its command given after ``--``."""
    official = [sys.executable, "tests/servers/official_server.py", "--stdio"]
    args = ["--tool", "echo", "--args", '{"text": "hi"}', "-n", "5", "--cold", "0"]
    result = run_cli(*args, "--", *official)
    assert result.returncode == 0, result.stderr
    assert "(stdio, modern era 2026-07-28, server official-interop/2.3.0)" in result.stdout
    for stage in WARM_STDIO:
        assert f"\n{stage} " in result.stdout


def test_cli_refuses_bad_input(timed_url: str) -> None:
    missing = run_cli(timed_url, "--tool", "nope", "-n", "1")
    assert missing.returncode == 2
    assert "no tool 'nope'" in missing.stderr
    assert "echo" in missing.stderr
    bad_args = run_cli(timed_url, "--tool", "echo", "--args", "[1]")
    assert bad_args.returncode == 2
    assert "JSON object" in bad_args.stderr
    invalid = run_cli(timed_url, "--tool", "echo", "--args", "{}", "-n", "2", "--cold", "0")
    assert invalid.returncode == 1, "a profile of nothing but failed calls is no profile"
    assert "errors: tool_error: 2" in invalid.stdout
    assert "every measured call failed" in invalid.stderr
