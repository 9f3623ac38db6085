"""One client process of a multi-process run (``millimcp bench --processes P``).

``python -m millimcp.lab.loadgen`` reads a :class:`ChildSpec` (one JSON line) on stdin,
connects and prints ``{"ready": true}``; then it reads ``{"start_at": <unix time>}``, runs its
share of the plan from that moment and prints one ``{"tick": ...}`` line a tick and a final
``{"report": ...}`` (or ``{"failed": "..."}``) on stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any, Literal

import msgspec

from millimcp.lab.loadgen.full import prepare_full
from millimcp.lab.loadgen.lean import prepare_lean
from millimcp.lab.loadgen.loop import Plan, run_event_loop
from millimcp.lab.recording import TickReport
from millimcp.lab.target import CallTemplate, Target

__all__ = ["ChildSpec", "child_main"]


class ChildSpec(msgspec.Struct, kw_only=True):
    """What the parent tells a child process (one JSON line on its stdin)."""

    plan: Plan
    tool: str
    arguments: dict[str, Any] | None
    id_base: int
    template: CallTemplate | None = None
    """Lean: the request to resend. Full: None, and the child opens its own Client."""
    target: Target | None = None
    era: Literal["auto", "modern", "handshake"] = "auto"


def _emit(line: dict[str, Any]) -> None:
    sys.stdout.buffer.write(msgspec.json.encode(line) + b"\n")
    sys.stdout.buffer.flush()


async def _child(spec: ChildSpec) -> None:
    from millimcp.lab.target import connect, ssl_context

    def on_tick(tick: TickReport) -> None:
        _emit({"tick": tick})

    async with contextlib.AsyncExitStack() as stack:
        if spec.template is not None:
            context = ssl_context(spec.target) if spec.target is not None else None
            ready = await prepare_lean(
                spec.template, spec.plan, on_tick, id_base=spec.id_base, ssl=context
            )
        else:
            assert spec.target is not None
            connection = await stack.enter_async_context(
                connect(
                    spec.target,
                    era=spec.era,
                    call_timeout=spec.plan.timeout_s,
                    max_in_flight=spec.plan.concurrency,
                )
            )
            ready = await prepare_full(
                connection.client, spec.tool, spec.arguments, spec.plan, on_tick
            )
        _emit({"ready": True})
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        start_at = float(msgspec.json.decode(line)["start_at"])
        start_ns = time.perf_counter_ns() + int((start_at - time.time()) * 1e9)
        report = await ready.go(start_ns)
        _emit({"report": report})


def child_main() -> int:
    line = sys.stdin.readline()
    spec = msgspec.json.decode(line, type=ChildSpec)
    try:
        run_event_loop(_child(spec))
    except Exception as exc:
        _emit({"failed": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0
