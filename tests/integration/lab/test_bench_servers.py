"""``millimcp bench`` against real servers: millimcp and the official SDK's MCPServer over
HTTP in both eras, server-everything over stdio; error kinds; several client processes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from millimcp.errors import NotSent
from millimcp.lab.bench import CLOSED_LOOP_NOTE, bench
from millimcp.lab.recording import decode_histogram
from millimcp.lab.results import Run
from millimcp.lab.target import Target, parse_target
from tests.conftest import free_port, start_server, stop_server
from tests.integration.interop.peers import server_everything_argv

BENCH_SERVER = "tests.integration.lab.bench_server:server"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def lab_url() -> Iterator[str]:
    port = free_port()
    process = start_server(
        [
            "-m",
            "millimcp",
            "serve",
            "tests.integration.lab.bench_server:server",
            "--port",
            str(port),
        ],
        port,
    )
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


@pytest.fixture(scope="module")
def official_url() -> Iterator[str]:
    port = free_port()
    process = start_server(
        [
            "-m",
            "uvicorn",
            "tests.integration.lab.bench_official_server:app",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        port,
    )
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


def check_consistent(run: Run, calls: int) -> None:
    """The parts of a run agree with each other."""
    lat = run.latency_ms
    assert run.calls == calls, run.errors
    assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["p999"]
    assert lat["p999"] <= lat["max"] * 1.001  # a bucket's top may pass the exact max
    assert lat["min"] <= lat["mean"] <= lat["max"]
    assert lat["min"] > 0
    assert len(run.samples_ms) == calls
    assert run.histogram is not None
    assert decode_histogram(run.histogram).get_total_count() == calls
    assert sum(point.calls for point in run.timeline) == calls
    assert run.throughput == pytest.approx(calls / run.duration_s)


@pytest.mark.parametrize("era", ["modern", "handshake"])
@pytest.mark.parametrize("client", ["lean", "full"])
async def test_millimcp_server_both_eras(lab_url: str, era: Any, client: Any) -> None:
    run = await bench(
        parse_target(lab_url),
        "echo",
        {"text": "hi"},
        concurrency=4,
        requests=200,
        warmup_s=0.2,
        era=era,
        client=client,
    )
    check_consistent(run, 200)
    assert run.errors == {}
    assert (run.era, run.transport, run.client) == (era, "http", client)
    assert run.server == "lab-bench-server/1.0.0"
    assert (run.mode, run.concurrency, run.processes) == ("closed", 4, 1)
    assert CLOSED_LOOP_NOTE in run.notes


@pytest.mark.parametrize("era", ["modern", "handshake"])
async def test_official_mcpserver_both_eras(official_url: str, era: Any) -> None:
    """The official SDK answers the handshake era with SSE streams: read to the response."""
    run = await bench(
        parse_target(official_url),
        "echo",
        {"text": "hi"},
        concurrency=2,
        requests=60,
        warmup_s=0.1,
        era=era,
    )
    check_consistent(run, 60)
    assert run.errors == {}
    assert run.era == era
    assert run.server == "lab-official/2.3.0"


async def test_server_everything_over_stdio(missing_tool: Any) -> None:
    command = server_everything_argv(missing_tool)
    run = await bench(
        Target("stdio", command=(*command, "stdio")),
        "echo",
        {"message": "hi"},
        concurrency=2,
        requests=100,
        warmup_s=0.1,
    )
    check_consistent(run, 100)
    assert run.errors == {}
    assert (run.transport, run.client, run.era) == ("stdio", "full", "handshake")
    assert run.server is not None
    assert run.server.startswith("mcp-servers/everything/")


@pytest.mark.parametrize(
    ("kind", "every", "expected"),
    [("tool", 4, {"tool_error": 50}), ("rpc", 5, {"jsonrpc_-32602": 40})],
)
async def test_errors_are_counted_by_kind(
    lab_url: str, kind: str, every: int, expected: dict[str, int]
) -> None:
    # One call in flight: the server numbers the calls in the order they are sent; the
    # probe call is its first.
    run = await bench(
        parse_target(lab_url),
        "misbehave",
        {"key": f"kinds-{kind}", "kind": kind, "every": every},
        concurrency=1,
        requests=200,
        warmup_s=0.0,
    )
    assert run.errors == expected
    assert run.calls == 200 - sum(expected.values())


async def test_a_call_past_its_timeout_is_a_timeout_and_the_connection_is_replaced(
    lab_url: str,
) -> None:
    run = await bench(
        parse_target(lab_url),
        "misbehave",
        {"key": "slow", "kind": "slow"},
        concurrency=2,
        requests=4,
        warmup_s=0.0,
        timeout_s=0.3,
    )
    assert run.errors == {"timeout": 4}
    assert run.calls == 0


async def test_processes_share_the_load_and_merge(lab_url: str) -> None:
    """Two client processes, an open loop of 200 calls/s for 2 s: each is due 200 calls."""
    run = await bench(
        parse_target(lab_url),
        "echo",
        {"text": "hi"},
        rate=200.0,
        concurrency=8,
        duration_s=2.0,
        warmup_s=0.3,
        processes=2,
    )
    check_consistent(run, 400)
    assert run.errors == {}
    assert (run.mode, run.rate, run.processes, run.duration_s) == ("open", 200.0, 2, 2.0)
    assert [point.t for point in run.timeline] == [0.0, 1.0]
    assert run.notes == []


@pytest.fixture(scope="module")
def tls_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bench server over HTTPS, with a certificate from a private CA (trustme)."""
    import trustme

    folder = tmp_path_factory.mktemp("tls")
    cert = trustme.CA().issue_cert("127.0.0.1")
    certfile, keyfile = folder / "cert.pem", folder / "key.pem"
    certfile.write_bytes(b"".join(pem.bytes() for pem in cert.cert_chain_pems))
    keyfile.write_bytes(cert.private_key_pem.bytes())
    port = free_port()
    process = start_server(
        [
            "-m", "millimcp", "serve", BENCH_SERVER, "--port", str(port),
            "--certfile", str(certfile), "--keyfile", str(keyfile),
        ],
        port,
    )  # fmt: skip
    yield f"https://127.0.0.1:{port}/mcp"
    stop_server(process)


@pytest.mark.parametrize("client", ["lean", "full"])
async def test_https_with_insecure(tls_url: str, client: Any) -> None:
    run = await bench(
        parse_target(tls_url, insecure=True),
        "echo",
        {"text": "hi"},
        concurrency=2,
        requests=50,
        warmup_s=0.0,
        client=client,
    )
    check_consistent(run, 50)
    assert run.errors == {}


async def test_https_verifies_certificates_by_default(tls_url: str) -> None:
    with pytest.raises(NotSent, match="certificate"):
        await bench(parse_target(tls_url), "echo", {"text": "hi"}, requests=5, warmup_s=0.0)
