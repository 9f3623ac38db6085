"""What a link is: its round-trip time, bandwidth, loss and jitter (:class:`LinkConfig`), and
the parsers for the command line's ``40ms``, ``10mbit`` and ``0.1%``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from millimcp.errors import ConfigurationError

__all__ = ["LinkConfig", "parse_bandwidth", "parse_duration", "parse_loss"]

_DURATION: Final = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(us|µs|ms|s)?\s*$")
_DURATION_UNITS: Final = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, None: 1e-3}
_RATE: Final = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmg]?)(bit|bps)?\s*$", re.IGNORECASE)
_PREFIX: Final = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}


@dataclass(frozen=True, slots=True)
class LinkConfig:
    """An emulated network path, the same both ways.

    Each direction is delayed by half of ``rtt_s`` and shaped to ``bandwidth_bps`` (bits per
    second; 0: unlimited). ``loss`` (0 to 1) is the share of TCP segments lost: since the
    emulator carries a byte stream, a loss shows as what TCP makes of it, a retransmission
    one RTT later holding back what follows. ``jitter_s`` adds up to that much (uniformly,
    either way) to each chunk's delay without ever reordering the stream.
    """

    rtt_s: float = 0.0
    bandwidth_bps: float = 0.0
    loss: float = 0.0
    jitter_s: float = 0.0
    mss: int = 1448
    """Segment size used to turn ``loss`` into a chance per chunk."""
    burst: int = 16384
    """Bytes the token bucket lets through at once after an idle spell."""
    chunk: int = 16384
    """At most this many bytes read (and scheduled) at once."""
    buffer: int = 1 << 20
    """Bytes held in flight per direction before the emulator stops reading (backpressure)."""
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.rtt_s < 0 or self.jitter_s < 0 or self.bandwidth_bps < 0:
            raise ConfigurationError("link: rtt, jitter and bandwidth cannot be negative")
        if not 0.0 <= self.loss < 1.0:
            raise ConfigurationError(f"link: loss must be in [0, 1), not {self.loss}")
        if min(self.mss, self.burst, self.chunk, self.buffer) <= 0:
            raise ConfigurationError("link: mss, burst, chunk and buffer must be positive")

    @property
    def one_way_s(self) -> float:
        return self.rtt_s / 2.0

    def describe(self) -> str:
        parts = [f"RTT {self.rtt_s * 1000:g} ms"]
        parts.append(
            f"{self.bandwidth_bps / 1e6:g} Mbit/s each way" if self.bandwidth_bps else "unshaped"
        )
        if self.loss:
            parts.append(f"{self.loss * 100:g}% loss")
        if self.jitter_s:
            parts.append(f"jitter {self.jitter_s * 1000:g} ms")
        return ", ".join(parts)


def parse_duration(text: str) -> float:
    """``40ms``, ``0.04s``, ``500us`` or a bare number of milliseconds -> seconds."""
    found = _DURATION.match(text)
    if found is None:
        raise ConfigurationError(f"not a duration: {text!r} (say 40ms, 0.04s or 500us)")
    return float(found.group(1)) * _DURATION_UNITS[found.group(2)]


def parse_bandwidth(text: str) -> float:
    """``10mbit``, ``500kbit``, ``1gbit`` (bits per second, as tc says them), ``2mbps``
    (bytes per second, also as tc), ``0`` or ``unlimited`` -> bits per second."""
    if text.strip().lower() in ("0", "unlimited", "none"):
        return 0.0
    found = _RATE.match(text)
    if found is None or found.group(3) is None:
        raise ConfigurationError(f"not a bandwidth: {text!r} (say 10mbit or 500kbit)")
    value = float(found.group(1)) * _PREFIX[found.group(2).lower()]
    return value * 8.0 if found.group(3).lower() == "bps" else value


def parse_loss(text: str) -> float:
    """``0.1%`` -> 0.001; a bare number is a fraction (``0.001``)."""
    stripped = text.strip()
    try:
        if stripped.endswith("%"):
            return float(stripped[:-1]) / 100.0
        return float(stripped)
    except ValueError:
        raise ConfigurationError(f"not a loss rate: {text!r} (say 0.1%)") from None
