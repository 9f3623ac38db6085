"""The demo's tables: durations and sizes in fitting units, plain aligned text, and the
S6.4 (per iteration, per request) and S6.2 (where one call's time goes) tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orders.config import NAIVE, TUNED, OrdersConfig

if TYPE_CHECKING:
    from millimcp.lab.profile import Profile
    from orders.workload import Measured

__all__ = [
    "HELD_PCT",
    "breakdown_table",
    "cpu_per_iteration",
    "kb",
    "ms",
    "pct",
    "per_request_table",
    "per_step_rows",
    "profiled_calls",
    "ratio",
    "s64_table",
    "shown",
    "table",
]

HELD_PCT = 99.0
"""A concurrency is held while at least this share of iterations succeeds."""


def ms(value: float | None) -> str:
    """A duration given in ms, with three significant digits in a fitting unit."""
    if value is None or value != value:
        return "-"
    if abs(value) < 1.0:
        return f"{value * 1000:.0f} µs"
    if abs(value) < 100.0:
        return f"{value:.3g} ms"
    if abs(value) < 1000.0:
        return f"{value:.0f} ms"
    return f"{value / 1000:.3g} s"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def shown(path: Path) -> str:
    """``path`` relative to the current directory when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def kb(size: int) -> str:
    return f"{size / 1000:.1f} KB"


def table(head: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """Plain aligned text; ``align`` has an 'l' or 'r' per column (default: first left)."""
    align = align or "l" + "r" * (len(head) - 1)
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(width) if side == "l" else cell.rjust(width)
            for cell, width, side in zip(cells, widths, align, strict=True)
        ]
        return "  " + "  ".join(parts).rstrip()

    rule = "  " + "  ".join("-" * width for width in widths)
    return "\n".join([line(head), rule, *(line(row) for row in rows)])


def ratio(before: float | None, after: float | None, *, lower_is_better: bool = True) -> str:
    if before is None or after is None or before <= 0 or after <= 0:
        return "-"
    factor = before / after if lower_is_better else after / before
    if 1 / 1.05 < factor < 1.05:
        return "same"
    return f"{factor:.1f}x better" if factor > 1 else f"{1 / factor:.1f}x worse"


# -- S6.4 -------------------------------------------------------------------------------------


def cpu_per_iteration(measured: Measured) -> float | None:
    """Server CPU time (ms) per iteration."""
    return measured.server_cpu_per_iteration_ms


def held(measured: Measured, concurrency: int, ramp: dict[str, int | None] | None) -> str:
    if ramp is not None and measured.label in ramp:
        level = ramp[measured.label]
        return "below 25" if level is None else str(level)
    return f">= {concurrency}" if measured.success_pct >= HELD_PCT else f"< {concurrency}"


def s64_table(
    naive: Measured,
    tuned: Measured,
    concurrency: int,
    ramp: dict[str, int | None] | None,
    asked: dict[str, int | None],
) -> str:
    a, b = naive.run.latency_ms, tuned.run.latency_ms

    def asked_text(measured: Measured) -> str:
        count = asked.get(measured.label)
        return "-" if count is None else f"{count:,}"

    rows = [
        ["mean", ms(a["mean"]), ms(b["mean"]), ratio(a["mean"], b["mean"])],
        ["P95", ms(a["p95"]), ms(b["p95"]), ratio(a["p95"], b["p95"])],
        ["P99", ms(a["p99"]), ms(b["p99"]), ratio(a["p99"], b["p99"])],
        [
            "server CPU (% of one core)",
            pct(naive.server_cpu_pct),
            pct(tuned.server_cpu_pct),
            "",
        ],
        [
            "server CPU per iteration",
            ms(cpu_per_iteration(naive)),
            ms(cpu_per_iteration(tuned)),
            ratio(cpu_per_iteration(naive), cpu_per_iteration(tuned)),
        ],
        [
            "highest concurrency held",
            held(naive, concurrency, ramp),
            held(tuned, concurrency, ramp),
            "",
        ],
        ["success rate", f"{naive.success_pct:.1f}%", f"{tuned.success_pct:.1f}%", ""],
        [
            "iterations/s",
            f"{naive.run.throughput:,.1f}",
            f"{tuned.run.throughput:,.1f}",
            ratio(naive.run.throughput, tuned.run.throughput, lower_is_better=False),
        ],
        [
            "iterations recorded (failed)",
            f"{naive.iterations:,} ({naive.failed:,})",
            f"{tuned.iterations:,} ({tuned.failed:,})",
            "",
        ],
        [
            "connections opened / reused",
            f"{naive.connections_opened:,} / {naive.connections_reused:,}",
            f"{tuned.connections_opened:,} / {tuned.connections_reused:,}",
            "",
        ],
        ["recommender calls (+ warm-up)", asked_text(naive), asked_text(tuned), ""],
        ["agents' client CPU", pct(naive.client_cpu_pct), pct(tuned.client_cpu_pct), ""],
    ]
    return table(["", "naive (before)", "tuned (after)", "after vs before"], rows)


def per_step_rows(naive: Measured, tuned: Measured) -> list[list[str]]:
    rows = []
    for name in ("order", "recs", "profiles"):
        cells = [name]
        for measured in (naive, tuned):
            found = (measured.run.steps or {}).get(name)
            if found is None:
                cells += ["-", "-", "-"]
                continue
            numbers = found.latency_ms
            cells += [ms(numbers["mean"]), ms(numbers["p95"]), ms(numbers["p99"])]
        rows.append(cells)
    return rows


def per_request_table(naive: Measured, tuned: Measured, *, sent: bool = False) -> str:
    """Per call: from the agent asking to the answer (queued behind the client's cap
    included), or with ``sent`` from sending the call (past the cap) to its answer."""
    a, b = naive.per_request(sent=sent), tuned.per_request(sent=sent)

    def cell(numbers: dict[str, float | None], key: str) -> str:
        value = numbers[key]
        if key == "success_rate":
            return "-" if value is None else f"{100.0 * value:.2f}%"
        return ms(value)

    rows = []
    for key, name in (
        ("mean_ms", "mean"),
        ("p95_ms", "P95"),
        ("p99_ms", "P99"),
        ("server_cpu_ms", "server CPU per call"),
        ("success_rate", "success rate"),
    ):
        after = ratio(a[key], b[key], lower_is_better=key != "success_rate")
        rows.append([name, cell(a, key), cell(b, key), after if key != "success_rate" else ""])
    calls = [len(m.request_samples()[0]) for m in (naive, tuned)]
    failed = [m.request_samples()[1] for m in (naive, tuned)]
    rows.append(
        ["calls (failed)", f"{calls[0]:,} ({failed[0]:,})", f"{calls[1]:,} ({failed[1]:,})", ""]
    )
    if not sent:
        rows.append(
            [
                "of which queued behind the cap (mean)",
                ms(naive.queued_ms()) if naive.asked_ms is not None else "no cap",
                ms(tuned.queued_ms()) if tuned.asked_ms is not None else "no cap",
                "",
            ]
        )
    head = "per request, sent to answer" if sent else "per request, asked to answer"
    return table([head, "naive (before)", "tuned (after)", "after vs before"], rows)


# -- S6.2 -------------------------------------------------------------------------------------


def profiled_calls(profile: Profile, config: OrdersConfig) -> list[dict[str, int]]:
    calls = profile.warm if config.pooled_client else profile.cold
    return [{k: v for k, v in call.items() if not k.startswith("_")} for call in calls]


def breakdown_table(naive: Profile, tuned: Profile, sizes: dict[str, tuple[int, int]]) -> str:
    from millimcp.lab.stages import stage_order, summarize, transport_share

    a_calls, b_calls = profiled_calls(naive, NAIVE), profiled_calls(tuned, TUNED)
    a, a_total = summarize(a_calls)
    b, b_total = summarize(b_calls)
    rows = []
    for name in stage_order([*a_calls, *b_calls]):
        sa, sb = a.get(name), b.get(name)
        rows.append(
            [
                name,
                ms(sa.mean_ms) if sa else "-",
                f"{sa.share:.1f}%" if sa else "",
                ms(sb.mean_ms) if sb else "-",
                f"{sb.share:.1f}%" if sb else "",
            ]
        )
    rows.append(["total", ms(a_total.mean_ms), "100%", ms(b_total.mean_ms), "100%"])
    rows.append(
        ["transport + serialization", "", pct(transport_share(a)), "", pct(transport_share(b))]
    )
    (na, nw), (ta, tw) = sizes["naive"], sizes["tuned"]
    rows.append(["response: JSON / wire", f"{kb(na)} / {kb(nw)}", "", f"{kb(ta)} / {kb(tw)}", ""])
    head = [
        "stage (mean)",
        f"naive: new conn. ({len(a_calls)} calls)",
        "share",
        f"tuned: kept alive ({len(b_calls)})",
        "share",
    ]
    return table(head, rows)
