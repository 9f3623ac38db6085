"""The demo's network: the article's WAN between the agents and the order service (the lab's
link emulator, ``millimcp link``, one per service), what the article claims for each step,
and ``.demo/summary.json``.

The WAN's figures come from S6.2's breakdown of one call:

- **RTT 50 ms**: "connect incl. handshake 150 ms" is three round trips, TCP's SYN/SYN-ACK and
  TLS 1.2's two (with TLS 1.3, as here, it is two: 100 ms; the HTTP round trip comes on top);
- **2 Mbit/s each way, per connection**: "response transfer (60 KB) 260 ms" is 480 kbit in
  the 235 ms left after the 25 ms one-way delay (the article's agents are many clients, each
  with its own path, so each connection gets its own bucket rather than sharing one).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orders.workload import Measured

__all__ = ["ARTICLE", "DEFAULT_BANDWIDTH", "DEFAULT_RTT", "Wan", "claims_rows", "write_summary"]

DEFAULT_RTT = "50ms"
DEFAULT_BANDWIDTH = "2mbit"

ARTICLE: dict[str, str] = {
    "pooled_client": "keep-alive pool: connect 150 -> 15 ms",
    "compression": "gzip + trimmed: transfer 260 -> 30 ms (60 -> 12 KB)",
    "trimmed": "gzip + trimmed: transfer 260 -> 30 ms (60 -> 12 KB)",
    "recs_cache": "LRU+TTL cache: recommendation 400 -> 2 ms on a hit",
    "covering_index": "covering index + async ORM: query 300 -> 45 ms",
    "async_db": "covering index + async ORM: query 300 -> 45 ms",
    "async_recs": "async recommendation call: no thread held 400 ms",
    "fast_codec": "assembly + JSON encode: 15 ms of 1,200 (S6.2)",
    "quiet_logging": "logging off the hot path: up to 40% of P99 (S5.5)",
    "client_cap": "client Semaphore(30): fewer timeouts at 200 agents",
}
"""Each S6.3 step's claimed effect, as the article gives it."""


@dataclass(frozen=True)
class Wan:
    """The emulated path (the link emulator's command-line values)."""

    rtt: str = DEFAULT_RTT
    bandwidth: str = DEFAULT_BANDWIDTH
    loss: str = "0"
    jitter: str = "0ms"

    def link_args(self, listen: int, target: int) -> list[str]:
        """``python -m`` arguments of the link process in front of port ``target``."""
        return [
            "millimcp",
            "link",
            "--listen",
            f"127.0.0.1:{listen}",
            "--to",
            f"127.0.0.1:{target}",
            "--rtt",
            self.rtt,
            "--bandwidth",
            self.bandwidth,
            "--loss",
            self.loss,
            "--jitter",
            self.jitter,
            "--path",
            "auto",
        ]

    def numbers(self) -> tuple[float, float]:
        """(RTT in ms, bandwidth in Mbit/s)."""
        from millimcp.lab.link import parse_bandwidth, parse_duration

        return parse_duration(self.rtt) * 1000.0, parse_bandwidth(self.bandwidth) / 1e6

    def describe(self) -> str:
        from millimcp.lab.link import LinkConfig, parse_bandwidth, parse_duration, parse_loss

        config = LinkConfig(
            parse_duration(self.rtt),
            parse_bandwidth(self.bandwidth),
            parse_loss(self.loss),
            parse_duration(self.jitter),
        )
        return config.describe()


def claims_rows(results: Sequence[Any], fmt: Any) -> list[list[str]]:
    """One row per A/B'd step: the article's claim and what turning the step off did here
    (P50 and P99, tuned -> without; * = significant beyond the demo's threshold)."""
    rows = []
    for result in results:
        if result.flag not in ARTICLE:
            continue
        metrics = {metric.name: metric for metric in result.comparison.metrics}
        cells = []
        for name in ("P50", "P99"):
            metric = metrics.get(name) or metrics.get(name.lower())
            if metric is None or not result.comparable:
                cells.append("-")
                continue
            mark = "*" if metric.verdict in ("regressed", "improved") else ""
            cells.append(f"{fmt(metric.a)} -> {fmt(metric.b)}{mark}")
        rows.append([result.flag, ARTICLE[result.flag], *cells, result.verdict()])
    return rows


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 3)


def _clean(numbers: Mapping[str, float | None]) -> dict[str, float | None]:
    return {key: _finite(value) for key, value in numbers.items()}


def write_summary(
    path: Path,
    *,
    agents: int,
    wan: Wan | None,
    tls: bool,
    link: str,
    naive: Measured,
    tuned: Measured,
    steps: Sequence[Any],
    think_s: float = 0.0,
) -> dict[str, Any]:
    """``summary.json`` (the issue's schema): conditions, naive and tuned per request and per
    iteration, and each step's P50/P95/P99 change (without the step vs tuned, in %).

    Beyond the schema: ``conditions.think_s`` (the agents' mean pause between iterations),
    and for naive and tuned ``per_request_sent`` (each call from sending it, past the client's
    cap, to its answer; ``per_request`` is from the agent asking) and ``queued_mean_ms`` (the
    mean wait for a slot of the cap; None: no cap)."""
    rtt, bandwidth = wan.numbers() if wan is not None else (0.0, 0.0)
    summary: dict[str, Any] = {
        "conditions": {
            "agents": agents,
            "rtt_ms": rtt,
            "bandwidth_mbit": bandwidth,
            "tls": tls,
            "link": link,
            "think_s": think_s,
            "python": sys.version.split()[0],
        },
    }
    for label, measured in (("naive", naive), ("tuned", tuned)):
        summary[label] = {
            "per_request": _clean(measured.per_request()),
            "per_iteration": _clean(measured.per_iteration()),
            "per_request_sent": _clean(measured.per_request(sent=True)),
            "queued_mean_ms": _finite(measured.queued_ms()),
        }
    changes: dict[str, Any] = {}
    for result in steps:
        metrics = {metric.name.lower(): metric for metric in result.comparison.metrics}
        entry: dict[str, Any] = {}
        for key in ("p50", "p95", "p99"):
            metric = metrics.get(key)
            entry[f"{key}_change"] = None if metric is None else _finite(metric.change_pct)
        entry["significant"] = bool(result.comparable) and any(
            metrics[key].verdict in ("regressed", "improved")
            for key in ("p50", "p95", "p99")
            if key in metrics
        )
        changes[result.flag] = entry
    summary["steps"] = changes
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary
