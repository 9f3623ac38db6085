"""The adaptive batching policy: learn what a batch costs, wait only when waiting pays.

Pure bookkeeping, no clock and no asyncio: the batcher passes every time in (seconds), so the
policy is tested with a fake cost model, deterministically.

What it learns, per model (one policy per batcher):

- **the cost of a batch of each size**: the least run time of the last batches of that size
  (:class:`CostModel`: interference from other work only ever adds time, so one stalled batch
  does not make a size look bad); sizes never run are estimated from the nearest ones that
  were (linearly between two, flat above the largest: optimistic, so that growing is tried);
- **the largest batch worth running** (:attr:`AdaptivePolicy.limit`): it starts at 1 row and
  grows a step (a quarter, at least one row) while demand exceeds it, once batches at the
  new size show that the step paid: their per-row cost is at least ``min_gain`` below the
  size before. When a step
  stops paying, the limit goes back to the size before it and stays (a probe one step up every
  ``probe_every`` batches notices a model whose costs changed). With a latency objective, a
  batch whose oldest caller waited and ran past the objective halves the limit (Clipper's
  additive increase, multiplicative decrease), and the limit never grows to a size whose run
  alone would miss the objective;
- **who comes back, and how soon**: callers in a closed loop (an agent, a benchmark) send
  their next request soon after their answer. The policy counts the rows a batch released
  and the arrivals since, and keeps a weighted mean of the delay from a release to each of
  those arrivals.

When the model frees up with ``n`` rows queued, running them now serves ``n / cost(n)`` rows
per second. If ``m`` released callers have not come back yet, waiting for them (until about
twice their usual return delay) serves ``(n + m) / (wait + cost(n + m))``. The policy waits
only when that is at least ``min_gain`` better, never longer than the batch of ``n`` would
take to run (nor past what the latency objective leaves). A lone caller is never kept
waiting: the only request queued is its own, and no one else is out.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

__all__ = ["AdaptivePolicy", "CostModel", "Wait"]


class CostModel:
    """Run time of a batch by its rows: the least of the recent runs per size, estimated
    between sizes.

    The least, not a mean: what else runs on the machine (other processes on the cores, a
    descheduled inference thread) only ever adds to a batch's run time, never takes from it,
    so the fastest of the last few runs of a size is its cost, and one slow run does not make
    a size look bad (a mean let a single stalled batch stop the limit's growth for good). The
    last ``window`` runs per size count: a model whose costs really change is followed within
    that many batches."""

    __slots__ = ("_count", "_least", "_recent", "window")

    def __init__(self, window: int = 8) -> None:
        self.window = window
        self._recent: dict[int, collections.deque[float]] = {}
        self._least: dict[int, float] = {}
        self._count: dict[int, int] = {}

    def __repr__(self) -> str:
        least = self._least
        sizes = ", ".join(f"{rows}: {least[rows] * 1e3:.2f} ms" for rows in sorted(least))
        return f"<CostModel {sizes}>"

    def observe(self, rows: int, seconds: float) -> None:
        recent = self._recent.get(rows)
        if recent is None:
            recent = self._recent[rows] = collections.deque(maxlen=self.window)
        recent.append(seconds)
        self._least[rows] = min(recent)
        self._count[rows] = self._count.get(rows, 0) + 1

    def count(self, rows: int) -> int:
        """How many batches of exactly ``rows`` were measured."""
        return self._count.get(rows, 0)

    def measured(self) -> dict[int, float]:
        """The estimated run time (seconds) of each size measured, by rows."""
        return dict(sorted(self._least.items()))

    def cost(self, rows: int) -> float | None:
        """Estimated run time of a batch of ``rows``; None before any batch ran."""
        mean = self._least
        if rows in mean:
            return mean[rows]
        if not mean:
            return None
        below = max((size for size in mean if size < rows), default=None)
        above = min((size for size in mean if size > rows), default=None)
        if below is None:
            assert above is not None
            return mean[above] * rows / above  # no smaller size: as if per-row cost were flat
        if above is None:
            return mean[below]  # larger than any run: optimistic, so that growing is tried
        share = (rows - below) / (above - below)
        return mean[below] + share * (mean[above] - mean[below])

    def cautious(self, rows: int) -> float:
        """Like :meth:`cost`, but past the largest size measured as if per-row cost stayed
        what it is there (no gain from batching): for checks against a latency objective."""
        mean = self._least
        if not mean:
            return 0.0
        top = max(mean)
        if rows <= top:
            cost = self.cost(rows)
            assert cost is not None
            return cost
        return mean[top] * rows / top

    def per_row(self, rows: int) -> float | None:
        cost = self.cost(rows)
        return None if cost is None else cost / rows


@dataclass(frozen=True, slots=True)
class Wait:
    """The policy's answer: wait up to ``seconds`` for ``rows`` rows in all (0: run now)."""

    seconds: float
    rows: int


RUN_NOW = Wait(0.0, 0)


class AdaptivePolicy:
    """The limit, the returning callers and the wait decision (see the module docstring)."""

    __slots__ = (
        "_below",
        "_plateau",
        "_proven",
        "_released",
        "_released_at",
        "_return_delay",
        "_returned",
        "_since_probe",
        "costs",
        "limit",
        "max_rows",
        "min_gain",
        "objective",
        "probe_every",
        "samples",
    )

    def __init__(
        self,
        max_rows: int,
        *,
        objective: float | None = None,
        min_gain: float = 0.03,
        probe_every: int = 64,
        samples: int = 3,
    ) -> None:
        self.max_rows = max_rows
        self.objective = objective
        """Latency objective (seconds, queue wait + run) or None."""
        self.min_gain = min_gain
        self.probe_every = probe_every
        self.samples = samples
        """Batches measured at a size before its cost decides a step."""
        self.costs = CostModel()
        self.limit = 1
        self._below: list[int] = []
        """The limits climbed through on the way to ``limit`` (the last is the step before)."""
        self._plateau: int | None = None
        self._proven = True
        """Whether the step up to ``limit`` was shown to pay (or it was settled on)."""
        self._since_probe = 0
        self._released = 0
        self._returned = 0
        self._released_at = 0.0
        self._return_delay: float | None = None

    def __repr__(self) -> str:
        return f"<AdaptivePolicy limit={self.limit} plateau={self._plateau} {self.costs!r}>"

    # -- what happened --------------------------------------------------------------------------

    def arrived(self, now: float) -> None:
        """A request arrived at ``now`` (seconds, any monotonic clock)."""
        if self._returned < self._released:
            self._returned += 1
            delay = max(0.0, now - self._released_at)
            mean = self._return_delay
            if mean is None:
                self._return_delay = delay
            elif delay <= 4 * mean + 0.001:  # later than that: a new caller, not a return
                self._return_delay = mean + 0.2 * (delay - mean)

    def released(self, rows: int, now: float) -> None:
        """A batch answered ``rows`` callers at ``now``: they may come back."""
        self._released = rows
        self._returned = 0
        self._released_at = now

    def ran(self, rows: int, seconds: float, backlog: int = 0) -> None:
        """A batch of ``rows`` ran in ``seconds``; ``backlog`` rows are queued as it ends.

        Only demand beyond the limit (the batch and the queue behind it hold more rows than
        the limit) lets the limit grow: a lone caller never does. Counting the queue, not only
        full batches, matters: closed-loop callers otherwise settle into groups that take
        turns, none of them full."""
        costs = self.costs
        costs.observe(rows, seconds)
        objective = self.objective
        if objective is not None and seconds > objective and self.limit > 1:
            self.limit = max(1, self.limit // 2)  # multiplicative decrease
            self._below = [size for size in self._below if size < self.limit]
            self._settle()
            return
        limit = self.limit
        if not self._proven:  # grew: did the step pay?
            lower = self._below[-1]
            if rows <= lower or costs.count(rows) < self.samples:
                return  # no batch past the old limit measured enough yet
            here, before = costs.per_row(rows), costs.per_row(lower)
            assert here is not None
            assert before is not None
            if here > before * (1 - self.min_gain):  # no: back, and stay there
                self.limit = self._below.pop()
                self._settle()
                return
            self._proven = True
        self._since_probe += 1
        full = rows + backlog > limit
        if not full or limit >= self.max_rows or costs.count(rows) < self.samples:
            return
        if self._plateau is not None and self._since_probe < self.probe_every:
            return
        grown = self._step_up(limit)
        if objective is not None and costs.cautious(grown) > objective:
            return
        self._below.append(limit)
        self.limit = grown
        self._plateau = None
        self._proven = False
        self._since_probe = 0

    def _settle(self) -> None:
        self._plateau = self.limit
        self._proven = True
        self._since_probe = 0

    # -- what to do -----------------------------------------------------------------------------

    def wait(self, queued: int, oldest_age: float, now: float) -> Wait:
        """The model is free and ``queued`` rows wait (the oldest for ``oldest_age``)."""
        limit = self.limit
        more = min(limit - queued, self._released - self._returned)
        mean = self._return_delay
        if more <= 0 or mean is None:
            return RUN_NOW
        costs = self.costs
        now_cost, then_cost = costs.cost(queued), costs.cost(queued + more)
        if now_cost is None or then_cost is None or now_cost <= 0:
            return RUN_NOW
        delay = self._released_at + 2 * mean - now
        if delay <= 0 or delay > now_cost:
            return RUN_NOW
        objective = self.objective
        if objective is not None and oldest_age + delay + then_cost > objective:
            return RUN_NOW
        if (queued + more) / (delay + then_cost) < queued / now_cost * (1 + self.min_gain):
            return RUN_NOW
        return Wait(delay, queued + more)

    # -- the ladder of limits -------------------------------------------------------------------

    def _step_up(self, rows: int) -> int:
        return min(self.max_rows, rows + max(1, rows // 4))
