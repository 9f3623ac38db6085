"""The ASGI app's memo of decoded MCP header values: right text, bounded, short values only."""

from __future__ import annotations

from millimcp.transports import http
from millimcp.transports.http import _TEXT, _TEXT_LONGEST, _TEXT_SIZE, _text


def test_a_value_is_decoded_as_latin_1_and_remembered() -> None:
    _TEXT.clear()
    assert _text(b"caf\xe9") == "caf\xe9"
    assert _TEXT[b"caf\xe9"] == "caf\xe9"


def test_the_memo_holds_short_values_only_and_starts_again_when_full() -> None:
    _TEXT.clear()
    long = b"x" * (_TEXT_LONGEST + 1)
    assert _text(long) == long.decode("latin-1")
    assert long not in _TEXT
    for i in range(_TEXT_SIZE * 2 + 3):
        _text(b"name-%d" % i)
        assert len(_TEXT) <= _TEXT_SIZE
    assert http._TEXT is _TEXT  # the app reads this very dict
