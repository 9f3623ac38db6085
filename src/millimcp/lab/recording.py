"""What a load generator records, and how the records of several processes merge exactly.

A :class:`Recorder` is fed latencies (nanoseconds, one ``list.append`` on the hot path) and
error kinds; once per tick it folds the batch into

- an HDR histogram of that tick and one of the whole run (microseconds, 3 significant digits:
  1 us to 1 hour), built from a ``Counter`` of the batch so the pure-Python
  ``record_value`` runs once per distinct value, not once per call;
- exact moments (count, mean, M2; merged with Chan's formula), min and max;
- a uniform reservoir of at most :data:`~millimcp.lab.results.MAX_SAMPLES` latencies
  (Vitter's algorithm L: the cost is per replacement, not per value).

Each process sends :class:`TickReport` lines and one :class:`LoadReport`; a :class:`Merger`
adds them up: histograms by bucket (hdrhistogram's encode/decode), moments exactly, reservoirs
by a multivariate hypergeometric draw (each process contributes in proportion to the calls
it saw), so the merged reservoir is again a uniform sample of every call.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from millimcp.errors import MissingExtra
from millimcp.lab.results import LATENCY_KEYS, MAX_SAMPLES, TimelinePoint

__all__ = [
    "LoadReport",
    "Merger",
    "Moments",
    "Recorder",
    "Reservoir",
    "TickReport",
    "decode_histogram",
    "histogram_class",
    "new_histogram",
]

HIGHEST_US: Final = 3_600_000_000
"""The largest latency the histograms hold: one hour, in microseconds."""
DIGITS: Final = 3


def histogram_class() -> Any:
    """hdrhistogram's ``HdrHistogram``, imported on first use; raises
    :class:`~millimcp.errors.MissingExtra` (the ``lab`` extra) when it is not installed, so
    a command can check before it measures."""
    try:
        from hdrh.histogram import HdrHistogram
    except ImportError as exc:
        raise MissingExtra("lab", "recording latencies", "hdrhistogram") from exc
    return HdrHistogram


def new_histogram() -> Any:
    """An empty HDR histogram of microseconds (1 us .. 1 h, 3 significant digits)."""
    return histogram_class()(1, HIGHEST_US, DIGITS)


def decode_histogram(text: str) -> Any:
    """A histogram from hdrhistogram's compressed base64 encoding."""
    return histogram_class().decode(text.encode("ascii"))


def encode_histogram(histogram: Any) -> str:
    return bytes(histogram.encode()).decode("ascii")


def _record(histogram: Any, latencies_ns: Iterable[int]) -> None:
    for value, count in Counter(min(ns // 1000, HIGHEST_US) for ns in latencies_ns).items():
        histogram.record_value(value, count)


class Moments(msgspec.Struct, array_like=True):
    """Count, mean and sum of squared deviations (M2) of latencies in milliseconds."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @classmethod
    def of(cls, values: Sequence[float]) -> Moments:
        n = len(values)
        if n == 0:
            return cls()
        mean = math.fsum(values) / n
        return cls(n, mean, math.fsum((x - mean) ** 2 for x in values))

    def merged(self, other: Moments) -> Moments:
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * other.count / n
        m2 = self.m2 + other.m2 + delta * delta * self.count * other.count / n
        return Moments(n, mean, m2)

    @property
    def stdev(self) -> float:
        """The sample standard deviation (0 for fewer than two values)."""
        return math.sqrt(self.m2 / (self.count - 1)) if self.count > 1 else 0.0


class Reservoir:
    """A uniform sample of at most ``capacity`` of the values offered (algorithm L)."""

    __slots__ = ("_next", "_rng", "_w", "capacity", "items", "seen")

    def __init__(self, capacity: int = MAX_SAMPLES, rng: random.Random | None = None) -> None:
        self.capacity = capacity
        self.items: list[float] = []
        self.seen = 0
        self._rng = rng or random.Random()
        self._w = 1.0
        self._next = capacity

    def _skip(self) -> None:
        rng = self._rng
        self._w *= math.exp(math.log(1.0 - rng.random()) / self.capacity)
        gap = math.log(1.0 - rng.random()) / math.log1p(-self._w) if self._w < 1.0 else 0.0
        self._next += int(gap) + 1

    def extend(self, values: Sequence[float]) -> None:
        start = self.seen
        self.seen += len(values)
        room = self.capacity - len(self.items)
        if room > 0:
            self.items.extend(values[:room])
            if len(self.items) == self.capacity:  # just filled: the first skip
                self._next = self.capacity - 1
                self._skip()
        while self._next < self.seen:
            self.items[self._rng.randrange(self.capacity)] = values[self._next - start]
            self._skip()

    @staticmethod
    def merge(
        parts: Sequence[tuple[Sequence[float], int]],
        capacity: int = MAX_SAMPLES,
        rng: random.Random | None = None,
    ) -> list[float]:
        """One uniform sample of the union: ``parts`` are (a process's sample, calls it saw)."""
        rng = rng or random.Random()
        total = sum(seen for _, seen in parts)
        if total <= capacity:
            return [x for items, _ in parts for x in items]
        bounds = list(_cumulative(seen for _, seen in parts))
        wanted = [0] * len(parts)
        for pick in rng.sample(range(total), capacity):
            index = next(i for i, bound in enumerate(bounds) if pick < bound)
            wanted[index] += 1
        merged: list[float] = []
        for (items, _), count in zip(parts, wanted, strict=True):
            merged.extend(rng.sample(list(items), min(count, len(items))))
        return merged


def _cumulative(values: Iterable[int]) -> Iterable[int]:
    total = 0
    for value in values:
        total += value
        yield total


class TickReport(msgspec.Struct, kw_only=True):
    """One tick of one process: calls and errors completed, and their latency histogram."""

    second: int
    calls: int
    errors: dict[str, int]
    histogram: str


class LoadReport(msgspec.Struct, kw_only=True):
    """Everything one process measured in its window."""

    calls: int
    errors: dict[str, int]
    histogram: str
    moments: Moments
    min_ns: int | None
    max_ns: int | None
    samples_ms: list[float]
    seen: int
    window_s: float
    cpu_s: float
    connections: int = 0
    """Connections the lean generator opened (reconnects included)."""


class Recorder:
    """The hot path appends to :attr:`batch` and counts :attr:`errors`; :meth:`tick` folds."""

    __slots__ = (
        "batch",
        "calls",
        "errors",
        "max_ns",
        "min_ns",
        "moments",
        "reservoir",
        "tick_errors",
        "total",
    )

    def __init__(self, rng: random.Random | None = None) -> None:
        self.batch: list[int] = []
        self.tick_errors: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.calls = 0
        self.total = new_histogram()
        self.moments = Moments()
        self.min_ns: int | None = None
        self.max_ns: int | None = None
        self.reservoir = Reservoir(rng=rng)

    def error(self, kind: str) -> None:
        self.tick_errors[kind] += 1

    def tick(self, second: int) -> TickReport:
        """Fold the latencies and errors since the last tick; their report as ``second``."""
        batch, self.batch = self.batch, []
        errors, self.tick_errors = self.tick_errors, Counter()
        histogram = new_histogram()
        if batch:
            _record(histogram, batch)
            self.total.add(histogram)
            low, high = min(batch), max(batch)
            self.min_ns = low if self.min_ns is None else min(self.min_ns, low)
            self.max_ns = high if self.max_ns is None else max(self.max_ns, high)
            values = [ns / 1e6 for ns in batch]
            self.moments = self.moments.merged(Moments.of(values))
            self.reservoir.extend(values)
            self.calls += len(batch)
        self.errors.update(errors)
        return TickReport(
            second=second,
            calls=len(batch),
            errors=dict(errors),
            histogram=encode_histogram(histogram),
        )

    def report(self, *, window_s: float, cpu_s: float, connections: int = 0) -> LoadReport:
        """The whole window (call :meth:`tick` first to fold the last batch)."""
        return LoadReport(
            calls=self.calls,
            errors=dict(self.errors),
            histogram=encode_histogram(self.total),
            moments=self.moments,
            min_ns=self.min_ns,
            max_ns=self.max_ns,
            samples_ms=list(self.reservoir.items),
            seen=self.reservoir.seen,
            window_s=window_s,
            cpu_s=cpu_s,
            connections=connections,
        )


def _percentile_ms(histogram: Any, pct: float) -> float:
    return float(histogram.get_value_at_percentile(pct)) / 1000.0


class Merger:
    """Adds up the ticks and reports of every process of one run."""

    def __init__(self, processes: int, rng: random.Random | None = None) -> None:
        self.processes = processes
        self._rng = rng or random.Random()
        self._ticks: dict[int, list[TickReport]] = {}
        self._reports: list[LoadReport] = []
        self.running = new_histogram()
        """Every latency reported in ticks so far (the live p50/p99)."""
        self.running_calls = 0
        self.running_errors = 0

    def add_tick(self, tick: TickReport) -> None:
        self._ticks.setdefault(tick.second, []).append(tick)
        self.running_calls += tick.calls
        self.running_errors += sum(tick.errors.values())
        if tick.calls:
            self.running.add(decode_histogram(tick.histogram))

    def add_report(self, report: LoadReport) -> None:
        self._reports.append(report)

    def running_percentiles_ms(self) -> tuple[float, float] | None:
        """p50 and p99 of what the ticks reported so far (None before the first call)."""
        if self.running.get_total_count() == 0:
            return None
        return _percentile_ms(self.running, 50.0), _percentile_ms(self.running, 99.0)

    def timeline(self) -> list[TimelinePoint]:
        points = []
        for second in sorted(self._ticks):
            ticks = self._ticks[second]
            histogram = new_histogram()
            for tick in ticks:
                if tick.calls:
                    histogram.add(decode_histogram(tick.histogram))
            calls = sum(t.calls for t in ticks)
            points.append(
                TimelinePoint(
                    t=float(second),
                    calls=calls,
                    errors=sum(sum(t.errors.values()) for t in ticks),
                    p50_ms=_percentile_ms(histogram, 50.0) if calls else None,
                    p99_ms=_percentile_ms(histogram, 99.0) if calls else None,
                )
            )
        return points

    @property
    def reports(self) -> list[LoadReport]:
        return list(self._reports)

    def calls(self) -> int:
        return sum(r.calls for r in self._reports)

    def errors(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for report in self._reports:
            total.update(report.errors)
        return dict(sorted(total.items()))

    def histogram(self) -> Any:
        merged = new_histogram()
        for report in self._reports:
            if report.calls:
                merged.add(decode_histogram(report.histogram))
        return merged

    def latency_ms(self) -> dict[str, float]:
        """``min, mean, stdev, p50 .. p999, max``: percentiles from the merged histogram,
        the rest exact."""
        moments = Moments()
        for report in self._reports:
            moments = moments.merged(report.moments)
        if moments.count == 0:
            return dict.fromkeys(LATENCY_KEYS, 0.0)
        histogram = self.histogram()
        lows = [r.min_ns for r in self._reports if r.min_ns is not None]
        highs = [r.max_ns for r in self._reports if r.max_ns is not None]
        return {
            "min": min(lows) / 1e6,
            "mean": moments.mean,
            "stdev": moments.stdev,
            "p50": _percentile_ms(histogram, 50.0),
            "p90": _percentile_ms(histogram, 90.0),
            "p95": _percentile_ms(histogram, 95.0),
            "p99": _percentile_ms(histogram, 99.0),
            "p999": _percentile_ms(histogram, 99.9),
            "max": max(highs) / 1e6,
        }

    def samples_ms(self) -> list[float]:
        parts = [(r.samples_ms, r.seen) for r in self._reports]
        return Reservoir.merge(parts, rng=self._rng)

    def encoded_histogram(self) -> str:
        return encode_histogram(self.histogram())
