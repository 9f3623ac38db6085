"""Fuzz targets: each takes any bytes and fails (an exception other than the documented
refusals, or a broken property) only on a bug. Run coverage-guided by ``make fuzz``
(:mod:`tests.fuzz.atheris_run`, atheris); every input in ``corpus/<target>/`` is replayed by
``test_corpus.py`` in the normal suite, so a crash once found stays fixed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from millimcp.codec.attachment import AttachmentFramingError, split
from millimcp.codec.sse import SseParser
from millimcp.errors import FrameTooLarge, InvalidRequest, ParseError
from millimcp.protocol.jsonrpc import decode_message


def request_decoder(data: bytes) -> None:
    """The JSON-RPC decoder refuses with ParseError or InvalidRequest, nothing else."""
    with contextlib.suppress(ParseError, InvalidRequest):
        decode_message(data)


def tensor_framing(data: bytes) -> None:
    """The attachment framing splits within the body or refuses; no copy of the attachment."""
    body = bytearray(data)
    try:
        message, attachment = split(body, 1024)
    except AttachmentFramingError:
        return
    assert len(message) <= 1024
    assert 8 + len(message) + len(attachment) <= len(body)
    assert attachment.obj is body  # a view, not a copy


def sse_parser(data: bytes) -> None:
    """The SSE parser gives the same events whatever the chunking (whole, byte by byte, or
    split where the first byte says), and never holds more than its limit."""
    whole = _events([data])
    assert whole == _events([data[i : i + 1] for i in range(len(data))])
    cut = data[0] % (len(data) + 1) if data else 0
    assert whole == _events([data[:cut], data[cut:]])


def _events(chunks: list[bytes]) -> list[bytes] | str:
    parser = SseParser(limit=256)
    events: list[bytes] = []
    try:
        for chunk in chunks:
            events += parser.feed(chunk)
    except FrameTooLarge:
        return "too large"
    return events


TARGETS: dict[str, Callable[[bytes], None]] = {
    "request_decoder": request_decoder,
    "tensor_framing": tensor_framing,
    "sse_parser": sse_parser,
}
