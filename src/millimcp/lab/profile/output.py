"""What a profile shows: the stage table, the notes under it, the heading, and the Run file
(kind ``"profile"``)."""

from __future__ import annotations

from millimcp.lab import _table
from millimcp.lab.profile.call import Profile
from millimcp.lab.results import Run, Stage, host_info, latency_summary
from millimcp.lab.stages import SHARE_WARNING, stage_order, summarize, transport_share

__all__ = ["heading", "notes", "render", "to_run"]


def render(profile: Profile) -> _table.Table:
    """The stage table: warm mean, p95 and share beside the cold calls' mean."""
    warm, warm_total = summarize(profile.warm)
    cold, cold_total = summarize(profile.cold)
    order = stage_order([*profile.cold, *profile.warm])
    table = _table.Table(
        [
            ("stage", "left"),
            ("mean", "right"),
            ("p95", "right"),
            ("share", "right"),
            (f"cold (mean of {len(profile.cold)})" if profile.cold else "cold", "right"),
            ("cold share", "right"),
        ]
    )
    for name in order:
        w = warm.get(name)
        c = cold.get(name)
        style = "dim" if w is None or w.share < 1.0 else None
        table.add(
            [
                name,
                _table.duration(w.mean_ms) if w else "-",
                _table.duration(w.p95_ms) if w else "-",
                _table.percent(w.share) if w else "-",
                _table.duration(c.mean_ms) if c else "-",
                _table.percent(c.share) if c else "-",
            ],
            style,
        )
    table.add(
        [
            "total",
            _table.duration(warm_total.mean_ms),
            _table.duration(warm_total.p95_ms),
            "100.0%",
            _table.duration(cold_total.mean_ms) if profile.cold else "-",
            "100.0%" if profile.cold else "-",
        ],
        "bold",
        rule=True,
    )
    return table


def notes(profile: Profile) -> list[str]:
    """The lines under the table: transport share (S7.1), cold vs warm (S2.1), caveats."""
    warm, warm_total = summarize(profile.warm)
    cold, cold_total = summarize(profile.cold)
    lines = []
    share = transport_share(warm)
    split = profile.transport == "http" and profile.server_timing
    if split:
        text = f"transport + serialization: {share:.1f}% of the warm call"
    else:
        hidden = "network" if profile.transport == "http" else "pipes"
        text = (
            f"transport + serialization: at least {share:.1f}% of the warm call (the "
            f"server's time includes the {hidden}: it cannot be split without Server-Timing)"
        )
    if share > SHARE_WARNING:
        text += (
            f"\nWARNING: above {SHARE_WARNING:.0f}%: transport and serialization, not the "
            "tool, set this call's latency"
        )
    elif split:
        text += f", under {SHARE_WARNING:.0f}%: the tool's own work dominates"
    lines.append(text)
    if profile.cold and warm_total.mean_ms > 0:
        ratio = cold_total.mean_ms / warm_total.mean_ms
        cold_text = (
            f"cold call: {_table.duration(cold_total.mean_ms)} vs "
            f"{_table.duration(warm_total.mean_ms)} warm ({ratio:.1f}x)"
        )
        if profile.transport == "http":
            setup = [name for name in ("dns", "connect", "tls", "initialize") if name in cold]
            spent = sum(cold[name].mean_ms for name in setup)
            cold_text += (
                f"; {_table.duration(spent)} of it sets the connection up "
                f"({', '.join(setup)}): keep connections alive and reuse them"
            )
        else:
            cold_text += "; a new process, its start-up included: keep the server process running"
        lines.append(cold_text)
    if profile.transport == "http" and not profile.server_timing:
        lines.append(
            "the server sent no Server-Timing: 'server' is the whole time to the first byte"
        )
    if profile.sse_replies:
        lines.append(
            f"{profile.sse_replies} of the warm replies came as SSE streams "
            "(first/last byte: of the event that answers)"
        )
    if profile.reconnects:
        lines.append(
            f"{profile.reconnects} warm calls needed a new connection (the server closed it): "
            "their connect time is in the warm figures"
        )
    if profile.errors:
        kinds = ", ".join(f"{kind}: {count}" for kind, count in profile.errors.items())
        lines.append(f"errors: {kinds}")
    return lines


def heading(profile: Profile) -> str:
    server = f", server {profile.server}" if profile.server else ""
    return (
        f"profile {profile.target}  tools/call {profile.tool}  "
        f"({profile.transport}, {profile.era} era {profile.version}{server})\n"
        f"{len(profile.warm)} warm calls, one at a time on one "
        f"{'kept-alive connection' if profile.transport == 'http' else 'process'}; "
        f"{len(profile.cold)} cold calls, each on a new "
        f"{'connection' if profile.transport == 'http' else 'process'}"
    )


def to_run(profile: Profile) -> Run:
    """The profile as a lab Run (kind ``"profile"``), for ``--export-json``."""
    warm, _ = summarize(profile.warm)
    cold, _ = summarize(profile.cold)
    samples = [
        sum(call.values()) / 1e6 for i, call in enumerate(profile.warm) if i not in profile.failed
    ]
    return Run(
        kind="profile",
        started_at=profile.started_at,
        target=profile.target,
        transport=profile.transport,
        era=profile.era,
        server=profile.server,
        tool=profile.tool,
        args=profile.arguments,
        mode="closed",
        concurrency=1,
        rate=None,
        processes=1,
        duration_s=profile.duration_s,
        warmup_s=profile.warmup_s,
        calls=len(samples),
        errors=dict(profile.errors),
        throughput=len(samples) / profile.duration_s if profile.duration_s > 0 else 0.0,
        latency_ms=latency_summary(samples),
        samples_ms=samples,
        stages={
            name: Stage(mean_ms=s.mean_ms, p95_ms=s.p95_ms, share=s.share)
            for name, s in warm.items()
        },
        cold={
            name: Stage(mean_ms=s.mean_ms, p95_ms=s.p95_ms, share=s.share)
            for name, s in cold.items()
        }
        or None,
        host=host_info(),
        notes=notes(profile),
        client="lean",
    )
