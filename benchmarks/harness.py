"""What the side-by-side benchmarks share: servers as pinned processes, CPU from ``/proc``.

A server is a Python command pinned to one CPU (:class:`ServerProcess`, under uvicorn or on
millimcp's native front); its CPU and the pinned core's use come from ``/proc/PID/stat``,
``/proc/PID/task/*/schedstat`` and ``/proc/stat``; :func:`calibrate` says how fast a core is
right now; :func:`environment` records what a run measured (versions, CPU, load average,
settings) and :func:`json_safe` makes it strict JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from millimcp.testing.processes import free_port, wait_for_port

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
SERVERS_DIR = BENCH_DIR / "servers"
HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PACKAGES = ("mcp", "fastmcp", "millimcp", "uvicorn", "httptools", "uvloop", "msgspec", "starlette")


# --------------------------------------------------------------------------- processes


def child_env() -> dict[str, str]:
    """The servers' environment: the repo's ``src`` first on the path so millimcp resolves."""
    env = dict(os.environ)
    extra = [str(REPO_ROOT / "src"), str(SERVERS_DIR)]
    if env.get("PYTHONPATH"):
        extra.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(extra)
    env.pop("PYTHONDEVMODE", None)
    env.pop("PYTHONTRACEMALLOC", None)
    return env


def pinned(cpu: int) -> Callable[[], None]:
    def pin() -> None:
        os.sched_setaffinity(0, {cpu})

    return pin


def proc_cpu_s(pid: int) -> tuple[float, float]:
    """User and sys CPU seconds of a whole process (all threads), from ``/proc/PID/stat``."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK  # utime, stime: fields 14, 15


def cpu_counters(pid: int, cpu: int) -> dict[str, float]:
    """Seconds so far: the server's CPU and run-queue wait, and the whole server CPU's use.

    ``cpu_busy`` is everything the pinned CPU ran (user, nice, system, irq, softirq) and
    ``cpu_steal`` the time the hypervisor took it away; ``cpu_busy - server_cpu`` is other
    processes (or interrupts) competing with the server.
    """
    wait_ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread may exit between listing and reading
            wait_ns += int((task / "schedstat").read_text().split()[1])
    label = f"cpu{cpu} "
    line = next(ln for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith(label))
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, line.split()[1:9])
    server_user, server_sys = proc_cpu_s(pid)
    return {
        "server_cpu": server_user + server_sys,
        "server_sys": server_sys,
        "server_wait": wait_ns / 1e9,
        "cpu_busy": (user + nice + system + irq + softirq) / CLK_TCK,
        "cpu_steal": steal / CLK_TCK,
    }


def calibrate(cpu: int, back_to: int, iterations: int = 200_000) -> float:
    """ns per iteration of a fixed pure-Python loop on ``cpu``: how fast that core is right now.

    Best of three, so it reflects the core's speed rather than momentary interference. On a
    shared or throttled host this moves a lot between sessions; CPU per call moves with it.
    """
    os.sched_setaffinity(0, {cpu})
    try:
        best = float("inf")
        for _ in range(3):
            total = 0
            t0 = time.perf_counter_ns()
            for i in range(iterations):
                total += i
            best = min(best, (time.perf_counter_ns() - t0) / iterations)
    finally:
        os.sched_setaffinity(0, {back_to})
    return best


def proc_status(pid: int, key: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    raise KeyError(key)


def rss_mb(pid: int) -> float:
    return int(proc_status(pid, "VmRSS").split()[0]) / 1024


def uvicorn_command(module: str) -> tuple[str, ...]:
    """``python -m uvicorn <module>:app`` with uvloop and httptools; ``{port}`` is filled in."""
    return (
        "-m",
        "uvicorn",
        f"{module}:app",
        "--app-dir",
        str(SERVERS_DIR),
        "--host",
        HOST,
        "--port",
        "{port}",
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
        "--log-level",
        "warning",
    )


class ServerProcess:
    """A server command pinned to one CPU, with its output kept in a log file.

    ``command`` is the argv after the Python executable; ``{port}`` in it is filled in.
    """

    def __init__(self, name: str, command: Sequence[str], cpu: int, cwd: Path = REPO_ROOT) -> None:
        self.name = name
        self.cpu = cpu
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix=f"bench-{name}-", suffix=".log", delete=False
        )
        self.proc = subprocess.Popen(
            [sys.executable, *(part.format(port=self.port) for part in command)],
            env=child_env(),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=pinned(cpu),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, lines: int = 15) -> str:
        self.log.flush()
        text = Path(self.log.name).read_text(errors="replace")
        return "\n".join(text.strip().splitlines()[-lines:])

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        try:
            wait_for_port(self.port, self.proc, timeout_s, host=HOST)
        except (RuntimeError, TimeoutError) as error:
            raise RuntimeError(f"{error}:\n{self.log_tail()}") from None
        allowed = proc_status(self.pid, "Cpus_allowed_list")
        if allowed != str(self.cpu):
            raise RuntimeError(f"server pinned to CPUs {allowed!r}, expected {self.cpu}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


@contextlib.contextmanager
def serving(server: ServerProcess) -> Iterator[ServerProcess]:
    """Wait until the server listens; stop it on the way out."""
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def native_command(module: str) -> tuple[str, ...]:
    """The module's ``app`` on millimcp's native front (uvloop), as ``run_http`` serves it."""
    code = (
        f"import sys; sys.path.insert(0, {str(SERVERS_DIR)!r}); from {module} import app; "
        "from millimcp.transports.native import run_native; "
        f"sys.exit(run_native(app, host={HOST!r}, port=int(sys.argv[1])))"
    )
    return ("-c", code, "{port}")


# --------------------------------------------------------------------------- measures and records


def percentile_ms(sorted_ns: list[int], q: float) -> float:
    if not sorted_ns:
        return float("nan")
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1e6


def shown(value: float | None, fmt: str) -> str:
    """``value`` formatted with ``fmt``, or ``-`` where there is none (a table's empty cell)."""
    return "-" if value is None else format(value, fmt)


def json_safe(value: Any) -> Any:
    """NaN/inf (a run with no successful calls) become null, so the file is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def git_revision() -> str:
    """Short commit of the repo, with ``+dirty`` when the work tree has changes."""
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def environment(args: argparse.Namespace) -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    if versions["millimcp"] is None and (REPO_ROOT / "src" / "millimcp").is_dir():
        versions["millimcp"] = f"src checkout {git_revision()}"
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "packages": versions,
        "config": {
            "runs": args.runs,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "connections": args.connections,
            "server_cpu": args.server_cpu,
            "client_cpu": args.client_cpu,
            "import_repeats": args.import_repeats,
        },
    }


def packages_line(env: dict[str, Any]) -> str:
    """The versions a run measured, as one line (from :func:`environment`)."""
    packages = ", ".join(f"{k} {v}" for k, v in env["packages"].items() if v is not None)
    return f"packages: {packages}, python {env['python']}\n"


def new_runner() -> asyncio.Runner:
    try:
        import uvloop
    except ImportError:
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)
