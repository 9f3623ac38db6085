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
  size before. A step that does not pay is not yet the end: cost curves are jagged (one row
  takes a matrix-vector path, two or three a matrix-matrix one that pays only from four; the
  example CNN on one CPU thread costs about as much per row from 6 to 14 rows, and 20-25 %
  less from 20 to 28), so the limit tries further steps against the last size that paid, up
  to :data:`LOOK_PAST` times that size (at least 3 rows more: twice, as this did first, left
  the CNN at 10-12 rows); when none pays it goes back there and stays (a probe one step up
  every ``probe_every`` batches notices a model whose costs changed). A size not run lately
  keeps the least of its runs under the load of then: each trial (a step up, a probe) is
  judged on its own runs only, and when a smaller size, when it last ran, cost less per row
  than the limit costs now, it is re-probed (at most every ``probe_every`` batches), and the
  limit steps down to it if its fresh runs pay, or goes back. With a latency
  objective, a batch whose oldest caller waited and ran past the objective halves the limit
  (Clipper's additive increase, multiplicative decrease), and the limit never grows to a
  size whose run alone would miss the objective;
- **who comes back, and how soon**: callers in a closed loop (an agent, a benchmark) send
  their next request soon after their answer. :class:`Returns` keeps the recent batches'
  releases, counts each arrival as a return of the oldest release with callers still out,
  and keeps weighted means of the delay from a release to a return and to the last return.

When the model frees up with ``n`` rows queued and ``m`` released callers still out, it
compares two ways for closed-loop callers to settle, in rows per second: run the ``n`` now,
and those out, back meanwhile, make the next batch (two groups taking turns, the model idle
only when a group is not back before the other's batch ends), or wait for them and run one
batch (the model idle while they are all out). It waits only when one batch serves at least
as many rows a second, never longer than the queued batch would take to run nor than waiting
can pay for, nor past what the latency objective leaves, and stops as soon as they are back.
Weighing only the next batch (``n / cost(n)`` now against ``(n + m) / (wait + cost(n + m))``)
let 32 closed-loop callers split into two groups (15 and 17) that took turns for good. While
a step up is on trial, a short wait that fills a batch of the new size is taken anyway, or a
step beyond the groups' size would never be measured. A lone caller is never kept waiting:
the only request queued is its own, and no one else is out.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

__all__ = ["AdaptivePolicy", "CostModel", "Returns", "Wait"]


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
        """How many batches of exactly ``rows`` were measured (since it was last forgotten)."""
        return self._count.get(rows, 0)

    def forget(self, rows: int) -> None:
        """Drop what was measured at ``rows``: its next runs alone decide its cost (a size not
        run lately keeps the least of runs under a load that may be gone; estimated from the
        sizes around it meanwhile)."""
        self._recent.pop(rows, None)
        self._least.pop(rows, None)
        self._count.pop(rows, None)

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


class Returns:
    """Callers answered by recent batches and not back yet, and how soon they come back.

    Closed-loop callers send their next request soon after their answer. Each batch's release
    is kept (when, how many callers, how many still out); an arrival is counted as a return
    of the oldest release with callers out (first answered, first back), and its delay from
    that release feeds a weighted mean, as does the delay until the last caller of a release
    is back. Attributing every arrival to the latest release instead, as this did first, made
    callers who come back after the next batch ended look like instant returns of that batch,
    and the batcher held the model idle for callers who were not coming. A release whose
    callers are not all back after four times the usual delay (and at least
    :data:`FORGET_AFTER`) is forgotten: those callers left, or were new ones."""

    __slots__ = ("_out", "all_back", "delay")

    def __init__(self) -> None:
        self._out: collections.deque[list[float]] = collections.deque(maxlen=16)
        """[released at, callers, callers still out], oldest first."""
        self.delay: float | None = None
        """Weighted mean delay from a release to a return (seconds)."""
        self.all_back: float | None = None
        """Weighted mean delay from a release until the last of its callers was back."""

    def __repr__(self) -> str:
        return f"<Returns out={sum(int(e[2]) for e in self._out)} delay={self.delay}>"

    def released(self, rows: int, now: float) -> None:
        self._out.append([now, rows, rows])

    def arrived(self, now: float) -> None:
        out = self._out
        self._forget(now)
        if not out:
            return
        entry = out[0]
        entry[2] -= 1
        delay = max(0.0, now - entry[0])
        self.delay = _follow(self.delay, delay)
        if not entry[2]:
            if entry[1] > 1:  # the last of them is back
                self.all_back = _follow(self.all_back, delay)
            out.popleft()

    def out(self, now: float) -> int:
        """Callers answered recently and not back yet."""
        self._forget(now)
        return sum(int(entry[2]) for entry in self._out)

    def back(self, rows: int, now: float) -> tuple[float, float, float] | None:
        """When ``rows`` of the callers out should be back: (expected, latest) seconds from
        ``now``, and the usual delay from a release until all its callers are back; None
        before any return was seen."""
        mean = self.delay
        if mean is None:
            return None
        usual = self.all_back if self.all_back is not None else 2 * mean
        counted = 0
        released_at = 0.0
        for entry in self._out:
            released_at = entry[0]
            counted += int(entry[2])
            if counted >= rows:
                break
        expected = released_at + usual - now
        return max(0.0, expected), expected + 0.5 * usual, usual  # slack for stragglers

    def _forget(self, now: float) -> None:
        mean = self.delay
        if mean is None:
            return
        out = self._out
        usual = self.all_back if self.all_back is not None else mean
        horizon = max(4 * usual + 0.001, FORGET_AFTER)
        while out and now - out[0][0] > horizon:
            out.popleft()


FORGET_AFTER = 0.05
"""Seconds a release's callers count as out at the least, however soon returns usually come:
a mean learned too low (from new callers taken for returns: 32 arriving at once look back
at once) must still see the real returns, or it would never learn better."""


def _follow(mean: float | None, sample: float) -> float:
    """A weighted mean that follows ``sample``; a sample past four times the mean (plus 1 ms)
    counts as that much (a straggler or a new caller moves it less, but it does move)."""
    if mean is None:
        return sample
    return mean + 0.2 * (min(sample, 4 * mean + 0.001) - mean)


LOOK_PAST = 4
"""How far past the last size that paid the limit looks for one that pays more (a multiple
of that size): the example CNN pays again only from 18-20 rows after paying at 6-8."""


class AdaptivePolicy:
    """The limit, the returning callers and the wait decision (see the module docstring)."""

    __slots__ = (
        "_below",
        "_plateau",
        "_probing",
        "_proven",
        "_rejected",
        "_return_to",
        "_since_probe",
        "_trial",
        "costs",
        "limit",
        "max_rows",
        "min_gain",
        "objective",
        "probe_every",
        "returns",
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
        self._probing = False
        """Whether the step up to ``limit`` is a probe from a plateau (no looking further)."""
        self._rejected = 0
        """The largest size tried past the last proven limit that did not pay."""
        self._since_probe = 0
        self._return_to = 0
        """While a size below the limit is re-probed: the limit to go back to (else 0)."""
        self._trial = 0
        """Batches run since that re-probe began."""
        self.returns = Returns()

    def __repr__(self) -> str:
        return f"<AdaptivePolicy limit={self.limit} plateau={self._plateau} {self.costs!r}>"

    # -- what happened --------------------------------------------------------------------------

    def arrived(self, now: float) -> None:
        """A request arrived at ``now`` (seconds, any monotonic clock)."""
        self.returns.arrived(now)

    def released(self, rows: int, now: float) -> None:
        """A batch answered ``rows`` callers at ``now``: they may come back."""
        self.returns.released(rows, now)

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
        if self._return_to:  # re-probing a size below the limit: does it pay now?
            self._step_down(limit)
            return
        if not self._proven:  # grew: did the step pay?
            lower = self._below[-1]
            if rows <= max(lower, self._rejected) or costs.count(rows) < self.samples:
                return  # no batch past the old limit (or the sizes tried) measured enough yet
            here, before = costs.per_row(rows), costs.per_row(lower)
            assert here is not None
            assert before is not None
            if here > before * (1 - self.min_gain):  # no: look further, or back and stay
                further = self._step_up(limit)
                if (
                    not self._probing
                    and limit < self.max_rows
                    and further <= max(LOOK_PAST * lower, lower + 3)
                    and (objective is None or costs.cautious(further) <= objective)
                ):
                    self._rejected = limit
                    self.limit = further
                    costs.forget(further)
                    return
                self.limit = self._below.pop()
                self._settle()
                return
            self._proven = True
            self._rejected = 0
        self._since_probe += 1
        if self._since_probe >= self.probe_every and self._probe_below(limit):
            return
        full = rows + backlog > limit
        if not full or limit >= self.max_rows or costs.count(rows) < self.samples:
            return
        if self._plateau is not None and self._since_probe < self.probe_every:
            return
        grown = self._step_up(limit)
        if objective is not None and costs.cautious(grown) > objective:
            return
        self._below.append(limit)
        self._probing = self._plateau is not None
        self.limit = grown
        costs.forget(grown)  # judged on its own runs, not on ones from another load
        self._plateau = None
        self._proven = False
        self._rejected = 0
        self._since_probe = 0

    def _settle(self) -> None:
        self._plateau = self.limit
        self._proven = True
        self._since_probe = 0
        self._return_to = 0

    def _probe_below(self, limit: int) -> bool:
        """Re-probe the size below ``limit`` whose per-row cost, when it last ran, beats what
        a row costs at the limit now by ``min_gain``: the limit was learned under another
        load, or the costs changed, and a smaller batch may pay more now. Its old runs are
        forgotten, so that only its runs from now on are set against the limit's."""
        costs = self.costs
        at = costs.per_row(limit)
        assert at is not None
        best, least = 0, at * (1 - self.min_gain)
        for rows, seconds in costs.measured().items():
            if rows < limit and seconds / rows < least:
                best, least = rows, seconds / rows
        if not best:
            return False
        costs.forget(best)
        self._return_to = limit
        self.limit = best
        self._trial = 0
        self._since_probe = 0
        return True

    def _step_down(self, limit: int) -> None:
        """A batch ran while ``limit`` (below the limit it came from) is re-probed: once it has
        run :attr:`samples` times, stay there if its per-row cost beats the old limit's by
        ``min_gain``, else go back (also when it cannot be measured: demand fell short)."""
        costs = self.costs
        self._trial += 1
        back = self._return_to
        if costs.count(limit) < self.samples:
            if self._trial >= self.probe_every:
                self.limit, self._return_to, self._since_probe = back, 0, 0
            return
        here, there = costs.per_row(limit), costs.per_row(back)
        assert here is not None
        assert there is not None
        if here <= there * (1 - self.min_gain):  # pays: the limit steps down for good
            self._below = [size for size in self._below if size < limit]
            self._rejected = 0
            self._settle()
        else:  # its own runs cost more: back to the limit, which stays where it was
            self.limit, self._return_to, self._since_probe = back, 0, 0

    # -- what to do -----------------------------------------------------------------------------

    def wait(self, queued: int, oldest_age: float, now: float) -> Wait:
        """The model is free and ``queued`` rows wait (the oldest for ``oldest_age``): run
        now, or wait for the callers out (the two cycles of the module docstring)."""
        returns = self.returns
        out = returns.out(now)
        more = min(self.limit - queued, out)
        if more <= 0:
            return RUN_NOW
        after = min(self.limit, out)  # the next batch if these run now
        costs = self.costs
        now_cost, then_cost, next_cost = (
            costs.cost(queued),
            costs.cost(queued + more),
            costs.cost(after),
        )
        if now_cost is None or then_cost is None or next_cost is None or now_cost <= 0:
            return RUN_NOW
        back = returns.back(more, now)
        if back is None:
            return RUN_NOW
        expected, deadline, usual = back
        # closed-loop callers, in rows per second: run the queue now, and those out, back
        # meanwhile, make the next batch (two groups taking turns; the model idles only when
        # a group is not back before the other's batch ends), or wait for them and run one
        # batch (the model idles while they are out)
        split = (queued + after) / max(now_cost + next_cost, usual + max(now_cost, next_cost))
        bound = min(now_cost, (queued + more) / split - then_cost)  # past it, waiting loses
        if not self._proven and queued + more >= self.limit:
            # a step up on trial: filling a batch of the new size is worth a short wait (for
            # a few batches), or callers in groups that fit the old size would keep taking
            # turns and the step would never be measured
            bound = now_cost
        elif (queued + more) / (usual + then_cost) < split:
            return RUN_NOW
        objective = self.objective
        if objective is not None:
            bound = min(bound, objective - oldest_age - then_cost)
        if deadline <= 0 or expected > bound:
            return RUN_NOW
        return Wait(min(bound, deadline), queued + more)

    # -- the ladder of limits -------------------------------------------------------------------

    def _step_up(self, rows: int) -> int:
        return min(self.max_rows, rows + max(1, rows // 4))
