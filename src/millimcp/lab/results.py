"""The Run file: what one lab run measured, as JSON (``--export-json``; read by compare, report).

::

    run = load_run("a.json")          # validates the shape; unknown fields are ignored
    run.latency_ms["p99"], run.throughput, run.errors, run.samples_ms
    save_run(run, "b.json")

Schema ``millimcp.lab/run@1`` (all times in milliseconds unless the name says ``_s``):

- ``kind`` ``"bench" | "profile" | "scenario"``; ``started_at`` ISO 8601 (UTC);
  ``target`` the URL or command line; ``transport`` ``"http" | "stdio"``; ``era``
  ``"modern" | "handshake"``; ``server`` ``"name/version"`` or null;
- ``tool``, ``args``: the call measured (null for a scenario);
- ``mode`` ``"closed"`` (each of ``concurrency`` workers sends its next call when the previous
  one is answered) or ``"open"`` (calls at a fixed ``rate`` per second, latency measured from
  each call's intended send time); ``processes`` client processes;
- ``duration_s`` (the measured window), ``warmup_s``; ``calls`` (successful), ``errors`` (kind
  -> count: ``http_503``, ``jsonrpc_-32602``, ``tool_error``, ``timeout``, ``connection``,
  ``protocol``; :func:`error_kind` names a failure's kind), ``throughput`` (successful calls
  per second);
- ``latency_ms``: ``min, mean, stdev, p50, p90, p95, p99, p999, max`` of successful calls;
- ``samples_ms``: a uniform reservoir of at most :data:`MAX_SAMPLES` latencies;
- ``histogram``: the HDR histogram of every latency (hdrhistogram's compressed base64
  encoding, in microseconds), or null;
- ``timeline``: one point per second of the window (``t`` = seconds since its start);
- ``stages``, ``cold`` (profile), ``steps`` (scenario): null when not measured;
- ``host``: where the client ran;
- ``notes``: caveats a reader must see (e.g. that a closed loop hides coordinated omission);
  ``client``: ``"lean"`` (pre-serialized requests on raw connections) or ``"full"`` (the
  millimcp Client), null when not applicable.
"""

from __future__ import annotations

import math
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from millimcp.errors import (
    CallTimeout,
    ConnectionLost,
    MillimcpError,
    NotSent,
    ProtocolError,
    RequestRejected,
)

__all__ = [
    "LATENCY_KEYS",
    "MAX_SAMPLES",
    "SCHEMA",
    "TOOL_ERROR",
    "Host",
    "Run",
    "Stage",
    "Step",
    "TimelinePoint",
    "error_kind",
    "host_info",
    "latency_summary",
    "load_run",
    "millimcp_version",
    "now_iso",
    "percentile",
    "save_run",
]

SCHEMA: Final = "millimcp.lab/run@1"
MAX_SAMPLES: Final = 20_000
"""The most latencies kept in ``samples_ms``."""
LATENCY_KEYS: Final = ("min", "mean", "stdev", "p50", "p90", "p95", "p99", "p999", "max")
TOOL_ERROR: Final = "tool_error"
"""The error kind of a result with ``isError: true``."""
_PERCENTILES: Final = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))


class TimelinePoint(msgspec.Struct, kw_only=True):
    """One second of a run: ``t`` seconds after the window opened (the second's start)."""

    t: float
    calls: int
    errors: int
    p50_ms: float | None = None
    p99_ms: float | None = None


class Stage(msgspec.Struct, kw_only=True):
    """One stage of a profiled call: its mean and p95, and its share of the total mean."""

    mean_ms: float
    p95_ms: float
    share: float


class Step(msgspec.Struct, kw_only=True):
    """One step of a scenario."""

    calls: int
    errors: int
    latency_ms: dict[str, float]


class Host(msgspec.Struct, kw_only=True):
    """Where the client ran."""

    python: str
    platform: str
    cpus: int
    millimcp: str


class Run(msgspec.Struct, kw_only=True):
    """One lab run (see the module docstring for each field)."""

    schema: str = SCHEMA
    kind: Literal["bench", "profile", "scenario"]
    started_at: str
    target: str
    transport: Literal["http", "stdio"]
    era: Literal["modern", "handshake"]
    server: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    mode: Literal["closed", "open"] = "closed"
    concurrency: int | None = None
    rate: float | None = None
    processes: int = 1
    duration_s: float
    warmup_s: float = 0.0
    calls: int
    errors: dict[str, int] = msgspec.field(default_factory=dict)
    throughput: float
    latency_ms: dict[str, float]
    samples_ms: list[float] = msgspec.field(default_factory=list)
    histogram: str | None = None
    timeline: list[TimelinePoint] = msgspec.field(default_factory=list)
    stages: dict[str, Stage] | None = None
    cold: dict[str, Stage] | None = None
    steps: dict[str, Step] | None = None
    host: Host
    notes: list[str] = msgspec.field(default_factory=list)
    client: str | None = None

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(Run)


def save_run(run: Run, path: str | os.PathLike[str]) -> None:
    """Write ``run`` as indented JSON."""
    Path(path).write_bytes(msgspec.json.format(_ENCODER.encode(run), indent=2) + b"\n")


def load_run(path: str | os.PathLike[str]) -> Run:
    """Read a Run file; raises ``ValueError`` naming the file when it is not one."""
    data = Path(path).read_bytes()
    try:
        run = _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise ValueError(f"{os.fspath(path)} is not a lab Run file: {exc}") from None
    if run.schema != SCHEMA:
        raise ValueError(f"{os.fspath(path)} has schema {run.schema!r}, not {SCHEMA!r}")
    return run


def percentile(ordered: Sequence[float], pct: float) -> float:
    """The nearest-rank percentile of sorted values (the smallest value with at least
    ``pct`` percent of the values at or below it), as HDR histograms report it."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(pct * len(ordered) / 100.0 - 1e-9))  # 99.9% of 1000 is 999
    return float(ordered[min(rank, len(ordered)) - 1])


def latency_summary(samples: Sequence[float]) -> dict[str, float]:
    """``min, mean, stdev, p50, p90, p95, p99, p999, max`` of latencies (any unit).

    ``stdev`` is the sample standard deviation (0 for fewer than two values). With no
    samples every key is 0.0 (JSON has no NaN).
    """
    if not samples:
        return dict.fromkeys(LATENCY_KEYS, 0.0)
    ordered = sorted(samples)
    n = len(ordered)
    mean = math.fsum(ordered) / n
    stdev = math.sqrt(math.fsum((x - mean) ** 2 for x in ordered) / (n - 1)) if n > 1 else 0.0
    summary = {"min": float(ordered[0]), "mean": mean, "stdev": stdev}
    for key, pct in _PERCENTILES:
        summary[key] = percentile(ordered, pct)
    summary["max"] = float(ordered[-1])
    return {key: summary[key] for key in LATENCY_KEYS}


def error_kind(error: BaseException) -> str:
    """The kind a failed call is counted under: ``timeout`` (the call's deadline),
    ``jsonrpc_<code>`` (a JSON-RPC error, whatever the HTTP status), ``http_<status>`` (an
    HTTP refusal without one), ``connection`` (never sent, or the connection broke),
    ``protocol`` (any other millimcp error: a reply that is not a JSON-RPC response). An
    exception from outside millimcp keeps its class name, so a surprise shows as itself."""
    if isinstance(error, CallTimeout):
        return "timeout"
    if isinstance(error, ProtocolError):
        return f"jsonrpc_{error.code}"
    if isinstance(error, RequestRejected):
        return f"http_{error.status}"
    if isinstance(error, NotSent | ConnectionLost | OSError):
        return "connection"
    if isinstance(error, MillimcpError):
        return "protocol"
    return type(error).__name__


def now_iso() -> str:
    """The current time, ISO 8601 in UTC with a ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def millimcp_version() -> str:
    """The installed millimcp's version (``"unknown"`` when run from a bare source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("millimcp")
    except PackageNotFoundError:
        return "unknown"


def host_info() -> Host:
    return Host(
        python=sys.version.split()[0],
        platform=platform.platform(),
        cpus=os.cpu_count() or 1,
        millimcp=millimcp_version(),
    )
