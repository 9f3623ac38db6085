"""20 calls in flight: one HTTP/2 connection against a pool of 20 HTTP/1.1 connections.

The server is ``millimcp serve servers/millimcp_echo.py --http granian`` (granian speaks
HTTP/1.1 and HTTP/2 on one port: h2c with prior knowledge in cleartext, ALPN over TLS),
pinned to ``--server-cpu``. The client is httpx (with h2), 20 closed-loop tasks, pinned to
``--client-cpu``. Variants: HTTP/1.1 x 20 connections and h2c x 1 connection in cleartext;
the same two over TLS (a trustme certificate). Variants alternate run by run; medians.

Both ends are Python here, so the absolute rates are the client's as much as the server's:
read the server CPU per call and the paired ratios.

    .venv/bin/python benchmarks/h2_vs_http1.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import trustme
from cryptography.hazmat.primitives import serialization
from harness import CLK_TCK, HOST, REPO_ROOT, child_env, new_runner, percentile_ms, pinned

from millimcp.testing import free_port, modern_request

VARIANTS = ("http1 x20", "h2c x1", "https1 x20", "h2-tls x1")
IN_FLIGHT = 20
BODY, HEADERS = modern_request("tools/call", {"name": "echo", "arguments": {"text": "hello"}})


def tree_cpu_s(pid: int) -> float:
    """User + sys CPU seconds of a process and all its descendants (granian forks workers)."""
    total = 0.0
    stack = [pid]
    while stack:
        current = stack.pop()
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{current}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
    return total


@contextlib.contextmanager
def granian(cpu: int, tls: tuple[Path, Path] | None) -> Iterator[tuple[int, int]]:
    port = free_port()
    args = [sys.executable, "-m", "millimcp", "serve", "millimcp_echo:server"]
    args += ["--http", "granian", "--port", str(port)]
    if tls is not None:
        args += ["--certfile", str(tls[0]), "--keyfile", str(tls[1])]
    proc = subprocess.Popen(
        args,
        env=child_env(),
        cwd=REPO_ROOT / "benchmarks" / "servers",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=pinned(cpu),
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.post(f"http://{HOST}:{port}/", timeout=1)
                break
            except httpx.ConnectError:
                time.sleep(0.1)
            except httpx.HTTPError:
                break  # something answered (TLS or not): it is up
        yield port, proc.pid
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def certificates(folder: Path) -> tuple[tuple[Path, Path], ssl.SSLContext]:
    ca = trustme.CA()
    cert = ca.issue_cert(HOST)
    certfile, keyfile = folder / "cert.pem", folder / "key.pem"
    certfile.write_bytes(b"".join(pem.bytes() for pem in cert.cert_chain_pems))
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return (certfile, keyfile), context


async def drive(
    url: str, client: httpx.AsyncClient, warmup: float, duration: float, server_pid: int
) -> tuple[int, list[int], float, str, float, float]:
    """Closed loop, IN_FLIGHT tasks: (calls, latencies, wall, HTTP versions, server CPU s,
    client CPU s), all but the versions over the measured window only."""
    latencies: list[int] = []
    calls = 0
    measuring = False
    stop = False
    versions: set[str] = set()

    async def worker() -> None:
        nonlocal calls
        while not stop:
            t0 = time.perf_counter_ns()
            response = await client.post(url, content=BODY, headers=HEADERS)
            if response.status_code != 200 or b'"hello"' not in response.content:
                raise RuntimeError(f"bad response {response.status_code}: {response.text[:200]}")
            versions.add(response.http_version)
            if measuring:
                latencies.append(time.perf_counter_ns() - t0)
                calls += 1

    tasks = [asyncio.create_task(worker()) for _ in range(IN_FLIGHT)]
    await asyncio.sleep(warmup)
    cpu0, client0 = tree_cpu_s(server_pid), time.process_time()
    measuring = True
    t0 = time.perf_counter()
    await asyncio.sleep(duration)
    measuring = False
    wall = time.perf_counter() - t0
    server_cpu, client_cpu = tree_cpu_s(server_pid) - cpu0, time.process_time() - client0
    stop = True
    await asyncio.gather(*tasks)
    return calls, latencies, wall, ",".join(sorted(versions)), server_cpu, client_cpu


def one_run(
    variant: str,
    args: argparse.Namespace,
    runner: asyncio.Runner,
    tls: tuple[Path, Path],
    context: ssl.SSLContext,
) -> dict[str, float]:
    secure = variant.startswith(("https", "h2-tls"))
    h2 = variant.startswith("h2")
    with granian(args.server_cpu, tls if secure else None) as (port, server_pid):
        url = f"{'https' if secure else 'http'}://{HOST}:{port}/mcp"
        limits = httpx.Limits(max_connections=1 if h2 else IN_FLIGHT)
        transport = httpx.AsyncHTTPTransport(
            http1=not h2,
            http2=h2,
            verify=context if secure else True,
            limits=limits,
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        )
        client = httpx.AsyncClient(transport=transport, timeout=30)

        async def measure() -> tuple[int, list[int], float, str, float, float]:
            async with client:
                return await drive(url, client, args.warmup, args.duration, server_pid)

        calls, lat, wall, versions, server_cpu, client_cpu = runner.run(measure())
    expected = "HTTP/2" if h2 else "HTTP/1.1"
    if versions != expected:
        raise RuntimeError(f"{variant}: spoke {versions}, expected {expected}")
    ordered = sorted(lat)
    return {
        "calls_per_s": calls / wall,
        "p50_ms": percentile_ms(ordered, 0.5),
        "p99_ms": percentile_ms(ordered, 0.99),
        "server_cpu_us": server_cpu / calls * 1e6,
        "client_cpu_us": client_cpu / calls * 1e6,
        "client_busy": client_cpu / wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {args.client_cpu})
    results: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as folder, new_runner() as runner:
        tls, context = certificates(Path(folder))
        for run in range(args.runs):
            order = VARIANTS[run % len(VARIANTS) :] + VARIANTS[: run % len(VARIANTS)]
            for variant in order:
                result = one_run(variant, args, runner, tls, context)
                results[variant].append(result)
                print(
                    f"run {run + 1} {variant:<11} {result['calls_per_s']:7,.0f} calls/s"
                    f"  p50 {result['p50_ms']:6.2f} ms  p99 {result['p99_ms']:6.2f} ms"
                    f"  server {result['server_cpu_us']:6.1f} µs/call"
                    f"  client busy {result['client_busy']:.0%}"
                )
    print(f"\n{IN_FLIGHT} calls in flight; medians over {args.runs} runs; granian server")
    print(
        f"{'variant':<11} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'srv µs':>7} {'cli µs':>7}"
        f" {'paired':>7}"
    )
    for variant in VARIANTS:
        runs = results[variant]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        base = results["https1 x20" if variant in ("https1 x20", "h2-tls x1") else "http1 x20"]
        paired = statistics.median(
            r["calls_per_s"] / b["calls_per_s"] for r, b in zip(runs, base, strict=True)
        )
        print(
            f"{variant:<11} {med['calls_per_s']:8,.0f} {med['p50_ms']:7.2f} {med['p99_ms']:7.2f}"
            f" {med['server_cpu_us']:7.1f} {med['client_cpu_us']:7.1f} {paired:7.2f}"
        )
    print(
        "srv/cli µs: server CPU (granian process tree) / client CPU per call;"
        " paired: calls/s over the HTTP/1.1 pool with the same security, same round"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
