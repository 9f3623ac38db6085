"""The stages of a profiled call: their order, their summary, the transport share, and the
server's own stages read from ``Server-Timing``.

A call is a :data:`CallTimes`: stage name -> nanoseconds, in the order of the flow; the
stages of one call add up to its duration, so the mean stages of many calls add up to the
mean call (a stage a call lacks counts as 0).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from millimcp.lab.stats import quantile

__all__ = [
    "SERIALIZATION_STAGES",
    "SHARE_WARNING",
    "TRANSPORT_STAGES",
    "CallTimes",
    "StageStats",
    "parse_server_timing",
    "server_stages",
    "stage_order",
    "summarize",
    "transport_share",
]

CallTimes = dict[str, int]
"""One call's stages in nanoseconds, in order; they add up to the call's duration."""

TRANSPORT_STAGES: Final = frozenset(
    {
        "dns",
        "connect",
        "tls",
        "spawn",
        "initialize",
        "upload",
        "write",
        "network/wait",
        "download",
        "read",
        "client wake-up",
    }
)
SERIALIZATION_STAGES: Final = frozenset(
    {"request encode", "response decode", "server decode", "server encode", "server compress"}
)
SHARE_WARNING: Final = 30.0
"""Above this share (%) of transport + serialization, the tool is not what sets the latency
(S7.1)."""

_BEFORE: Final = (
    "dns",
    "connect",
    "tls",
    "spawn",
    "initialize",
    "request encode",
    "upload",
    "write",
)
_AFTER: Final = (
    "server",
    "network/wait",
    "server+pipe",
    "download",
    "read",
    "client wake-up",
)
_LAST: Final = "response decode"


@dataclass(frozen=True, slots=True)
class StageStats:
    mean_ms: float
    p95_ms: float
    share: float
    """Percent of the mean total."""


def stage_order(calls: Sequence[CallTimes]) -> list[str]:
    """Every stage seen in ``calls``, in the order of the flow (server stages as sent)."""
    server: list[str] = []
    seen: set[str] = set()
    for call in calls:
        for name in call:
            if name not in seen:
                seen.add(name)
                if name.startswith("server ") and name not in _AFTER:
                    server.append(name)
    order = [name for name in _BEFORE if name in seen] + server
    order += [name for name in _AFTER if name in seen]
    if _LAST in seen:
        order.append(_LAST)
    return order + sorted(seen - set(order))


def summarize(calls: Sequence[CallTimes]) -> tuple[dict[str, StageStats], StageStats]:
    """Mean, p95 and share of each stage over ``calls`` (a stage a call lacks counts as 0,
    so the means still add up to the mean total), and the same for the total."""
    if not calls:
        return {}, StageStats(0.0, 0.0, 0.0)
    totals = sorted(sum(call.values()) / 1e6 for call in calls)
    mean_total = sum(totals) / len(totals)
    stages: dict[str, StageStats] = {}
    for name in stage_order(calls):
        values = sorted(call.get(name, 0) / 1e6 for call in calls)
        mean = sum(values) / len(values)
        share = 100.0 * mean / mean_total if mean_total > 0 else 0.0
        stages[name] = StageStats(mean, quantile(values, 0.95), share)
    return stages, StageStats(mean_total, quantile(totals, 0.95), 100.0)


def transport_share(stages: Mapping[str, StageStats]) -> float:
    """The share (%) of transport and serialization: connecting, moving and (de)coding bytes,
    on both sides, as far as the server reports its stages."""
    wanted = TRANSPORT_STAGES | SERIALIZATION_STAGES
    return sum(stats.share for name, stats in stages.items() if name in wanted)


# -- Server-Timing ----------------------------------------------------------------------------


def parse_server_timing(value: str) -> list[tuple[str, float]]:
    """``Server-Timing`` metrics as (name, milliseconds), in order; metrics without ``dur``
    are left out."""
    metrics: list[tuple[str, float]] = []
    for entry in _split_unquoted(value, ","):
        name, *params = (part.strip() for part in _split_unquoted(entry, ";"))
        if not name:
            continue
        for param in params:
            key, _, raw = param.partition("=")
            if key.strip().lower() == "dur":
                with contextlib.suppress(ValueError):
                    metrics.append((name, float(raw.strip().strip('"'))))
                break
    return metrics


def _split_unquoted(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    start = 0
    quoted = False
    for i, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def server_stages(headers: Mapping[str, str], ttfb_ns: int) -> tuple[CallTimes, bool]:
    """The server's stages and the network/wait between them and the time to first byte
    (or one ``server`` stage without ``Server-Timing``); whether the header was there."""
    value = headers.get("server-timing")
    metrics = parse_server_timing(value) if value else []
    if not metrics:
        return {"server": ttfb_ns}, False
    stages: CallTimes = {}
    total: int | None = None
    for name, ms in metrics:
        ns = round(ms * 1e6)
        if name == "total":
            total = ns
        else:
            key = f"server {name}"
            stages[key] = stages.get(key, 0) + ns
    if total is None:
        total = sum(stages.values())
    stages["network/wait"] = max(0, ttfb_ns - total)
    return stages, True
