"""The link emulator's model (no clock): the token bucket, delays, jitter without reordering,
loss as a retransmission, and the command line's units."""

from __future__ import annotations

import random

import pytest

from millimcp.errors import ConfigurationError
from millimcp.lab.link import (
    LinkConfig,
    Schedule,
    TokenBucket,
    kernel_commands,
    netem_status,
    parse_bandwidth,
    parse_duration,
    parse_loss,
)


def test_units_parse_as_tc_says_them() -> None:
    assert parse_duration("40ms") == pytest.approx(0.040)
    assert parse_duration("0.5s") == pytest.approx(0.5)
    assert parse_duration("250us") == pytest.approx(0.00025)
    assert parse_duration("12") == pytest.approx(0.012)
    assert parse_bandwidth("10mbit") == pytest.approx(10e6)
    assert parse_bandwidth("500kbit") == pytest.approx(5e5)
    assert parse_bandwidth("1Gbit") == pytest.approx(1e9)
    assert parse_bandwidth("2mbps") == pytest.approx(16e6)
    assert parse_bandwidth("unlimited") == 0.0
    assert parse_loss("0.1%") == pytest.approx(0.001)
    assert parse_loss("0.02") == pytest.approx(0.02)
    for bad, parse in (("fast", parse_duration), ("10", parse_bandwidth), ("x%", parse_loss)):
        with pytest.raises(ConfigurationError):
            parse(bad)


def test_a_config_refuses_what_makes_no_sense() -> None:
    with pytest.raises(ConfigurationError):
        LinkConfig(rtt_s=-1.0)
    with pytest.raises(ConfigurationError):
        LinkConfig(loss=1.0)
    with pytest.raises(ConfigurationError):
        LinkConfig(chunk=0)
    text = LinkConfig(0.04, 10e6, 0.001, 0.005).describe()
    assert text == "RTT 40 ms, 10 Mbit/s each way, 0.1% loss, jitter 5 ms"


def test_the_token_bucket_lets_a_burst_through_then_paces_at_the_rate() -> None:
    bucket = TokenBucket(rate=1000.0, burst=100)
    assert bucket.reserve(100, 0.0) == 0.0  # the full bucket
    assert bucket.reserve(100, 0.0) == pytest.approx(0.1)  # then 100 bytes at 1000/s
    assert bucket.reserve(50, 0.0) == pytest.approx(0.15)
    # idle long enough: full again, but never more than the burst
    assert bucket.reserve(100, 10.0) == 10.0
    assert bucket.reserve(1, 10.0) == pytest.approx(10.001)
    assert TokenBucket(rate=0.0, burst=1).reserve(10**9, 3.0) == 3.0  # unlimited


def test_each_chunk_arrives_half_an_rtt_after_it_is_sent() -> None:
    schedule = Schedule(LinkConfig(rtt_s=0.1))
    assert schedule.arrival(1000, 1.0) == pytest.approx(1.05)
    assert schedule.arrival(1000, 2.0) == pytest.approx(2.05)


def test_bandwidth_adds_the_time_to_send_after_the_burst() -> None:
    config = LinkConfig(rtt_s=0.04, bandwidth_bps=8e6, burst=16384)  # 1 MB/s
    schedule = Schedule(config)
    times = [schedule.arrival(16384, 0.0) for _ in range(8)]
    assert times[0] == pytest.approx(0.02)
    assert times[-1] == pytest.approx(0.02 + 7 * 16384 / 1e6)


def test_jitter_never_reorders() -> None:
    schedule = Schedule(LinkConfig(rtt_s=0.04, jitter_s=0.02, seed=1))
    times = [schedule.arrival(100, i * 0.001) for i in range(2000)]
    assert times == sorted(times)
    spread = [t - i * 0.001 for i, t in enumerate(times)]
    assert min(spread) >= 0.0
    assert max(spread) > 0.035  # the jitter did move some chunks


def test_a_lost_segment_costs_an_rtt_and_holds_back_what_follows() -> None:
    config = LinkConfig(rtt_s=0.05, loss=0.5)
    schedule = Schedule(config, random.Random(7))
    times = [schedule.arrival(1448, i * 0.1) for i in range(200)]  # one at a time
    assert 60 < schedule.losses < 140
    assert times == sorted(times)
    late = [t - i * 0.1 for i, t in enumerate(times)]
    assert sorted({round(x, 6) for x in late}) == [0.025, 0.075]  # on time, or an RTT late
    burst = Schedule(config, random.Random(7))
    together = [burst.arrival(1448, 0.0) for _ in range(10)]
    first_lost = next(i for i, t in enumerate(together) if t > 0.025)
    assert all(t == pytest.approx(0.075) for t in together[first_lost:])  # held back behind it
    big = Schedule(LinkConfig(rtt_s=0.05, loss=0.001), random.Random(3))
    small = Schedule(LinkConfig(rtt_s=0.05, loss=0.001), random.Random(3))
    for _ in range(3000):
        big.arrival(16 * 1448, 0.0)
        small.arrival(100, 0.0)
    assert big.losses > 5 * max(1, small.losses)  # the chance grows with the segments


def test_the_kernel_path_is_described_with_netem_on_both_ends() -> None:
    usable, why = netem_status()
    assert isinstance(usable, bool)
    assert why
    commands = kernel_commands(LinkConfig(0.04, 10e6, 0.001, 0.005))
    qdiscs = [c for c in commands if "netem" in c]
    assert len(qdiscs) == 2
    for command in qdiscs:
        assert command[command.index("delay") + 1 :][:2] == ["20ms", "5ms"]
        assert "10000kbit" in command
        assert "0.1%" in command
