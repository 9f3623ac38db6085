"""The bench's parts without a server: HTTP framing, reply classes, exact merging."""

from __future__ import annotations

import random
import statistics

import pytest

from millimcp.errors import ResponseFramingError
from millimcp.lab.http1 import ResponseReader, ResponseReceived
from millimcp.lab.loadgen import classify, parse_response
from millimcp.lab.recording import Merger, Moments, Recorder, Reservoir, decode_histogram

OK = b'{"jsonrpc":"2.0","id":7,"result":{"content":[],"isError":false}}'


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (200, OK, None),
        (200, b'{"jsonrpc":"2.0","id":7,"result":{"content":[]}}', None),
        (200, b'{"jsonrpc":"2.0","id":7,"result":{"content":[],"isError":true}}', "tool_error"),
        (
            200,
            b'{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"isError":true,'
            b'"error":{"code":1}},"content":[]}}',
            None,
        ),
        (400, b'{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"x"}}', "jsonrpc_-32602"),
        (
            503,
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32050,"message":"busy"}}',
            "jsonrpc_-32050",
        ),
        (502, b"<html>bad gateway</html>", "http_502"),
        (404, b"", "http_404"),
        (200, b"not json", "protocol"),
        (200, b'{"jsonrpc":"2.0","id":7}', "protocol"),
    ],
)
def test_replies_are_classified_by_kind(status: int, body: bytes, kind: str | None) -> None:
    assert classify(status, body) == kind


def response(body: bytes, *, chunked: bool = False, split: int = 5) -> bytes:
    if not chunked:
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + split]), body[i : i + split])
        for i in range(0, len(body), split)
    )
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"


@pytest.mark.parametrize("chunked", [False, True])
def test_a_response_is_framed_only_once_complete(chunked: bool) -> None:
    raw = response(OK, chunked=chunked) + b"HTTP/1.1 200 OK\r\n"
    whole = len(raw) - len(b"HTTP/1.1 200 OK\r\n")
    for cut in range(whole):
        assert parse_response(raw[:cut]) is None
    assert parse_response(raw) == (200, OK, whole)


def test_chunked_bodies_decode_fed_byte_by_byte() -> None:
    raw = response(OK, chunked=True, split=3) + b"tail"
    reader = ResponseReader()
    out = b""
    for i in range(len(raw) - 4):
        events = reader.feed(raw[i : i + 1], i)
        for event in events:
            assert isinstance(event, ResponseReceived)
            out += event.body
        assert bool(events) == (i == len(raw) - 5)
    assert out == OK


def test_unframeable_responses_are_refused() -> None:
    with pytest.raises(ResponseFramingError, match="neither"):
        parse_response(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nabc")
    with pytest.raises(ResponseFramingError, match="status"):
        parse_response(b"HTTP/1.1 2xx OK\r\nContent-Length: 0\r\n\r\n")


def test_the_reservoir_is_a_uniform_sample() -> None:
    reservoir = Reservoir(2000, random.Random(7))
    values = [float(v) for v in range(200_000)]
    for start in range(0, len(values), 999):
        reservoir.extend(values[start : start + 999])
    assert reservoir.seen == 200_000
    assert len(reservoir.items) == 2000
    assert len(set(reservoir.items)) == 2000
    # Each decile holds about a tenth (binomial sd ~13 of 200; 6 sd of slack).
    deciles = [
        sum(1 for x in reservoir.items if i * 20_000 <= x < (i + 1) * 20_000) for i in range(10)
    ]
    assert all(120 <= count <= 280 for count in deciles), deciles


def test_merged_reservoirs_take_from_each_in_proportion() -> None:
    rng = random.Random(3)
    merged = Reservoir.merge([([1.0] * 100, 9000), ([2.0] * 100, 1000)], capacity=100, rng=rng)
    assert len(merged) == 100
    assert 75 <= merged.count(1.0) <= 100
    assert Reservoir.merge([([1.0], 1), ([2.0, 3.0], 2)], capacity=10) == [1.0, 2.0, 3.0]


def test_moments_merge_exactly() -> None:
    data = [random.Random(1).lognormvariate(0, 1) for _ in range(1001)]
    merged = Moments.of(data[:300]).merged(Moments.of(data[300:]))
    assert merged.count == 1001
    assert merged.mean == pytest.approx(statistics.fmean(data), rel=1e-12)
    assert merged.stdev == pytest.approx(statistics.stdev(data), rel=1e-9)


def test_two_processes_merge_to_what_one_would_have_recorded() -> None:
    rng = random.Random(11)
    latencies = [int(rng.lognormvariate(13.5, 0.6)) for _ in range(30_000)]  # ~1 ms in ns
    one = Recorder()
    halves = [Recorder(), Recorder()]
    whole = Merger(1)
    split = Merger(2)
    for second, start in enumerate(range(0, len(latencies), 10_000)):
        batch = latencies[start : start + 10_000]
        one.batch.extend(batch)
        whole.add_tick(one.tick(second))
        halves[0].batch.extend(batch[::2])
        halves[1].batch.extend(batch[1::2])
        halves[1].error("timeout")
        for recorder in halves:
            split.add_tick(recorder.tick(second))
    whole.add_report(one.report(window_s=3.0, cpu_s=1.0))
    for recorder in halves:
        split.add_report(recorder.report(window_s=3.0, cpu_s=1.0))
    assert split.calls() == whole.calls() == 30_000
    assert split.errors() == {"timeout": 3}
    ours, theirs = split.latency_ms(), whole.latency_ms()
    for key in ("min", "max", "p50", "p90", "p95", "p99", "p999"):
        assert ours[key] == theirs[key], key
    assert ours["mean"] == pytest.approx(theirs["mean"], rel=1e-12)
    assert ours["stdev"] == pytest.approx(theirs["stdev"], rel=1e-9)
    assert decode_histogram(split.encoded_histogram()).get_total_count() == 30_000
    assert [(p.t, p.calls, p.errors) for p in split.timeline()] == [
        (0.0, 10_000, 1),
        (1.0, 10_000, 1),
        (2.0, 10_000, 1),
    ]
    assert [p.p99_ms for p in split.timeline()] == [p.p99_ms for p in whole.timeline()]
    assert len(split.samples_ms()) == 20_000
