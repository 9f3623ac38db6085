"""millimcp.codec.sse: one JSON message per SSE event, on a single data line."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from millimcp.codec import SSE_KEEPALIVE, encode, sse_event

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


def parse_event(frame: bytes) -> dict[str, list[bytes]]:
    """Split one SSE event into its fields the way a client does (LF, CR or CRLF ends a line)."""
    assert frame.endswith(b"\n\n"), frame
    fields: dict[str, list[bytes]] = {}
    for line in frame[:-2].replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
        name, _, value = line.partition(b":")
        fields.setdefault(name.decode(), []).append(value.removeprefix(b" "))
    return fields


def test_sse_event_frames_a_message_event() -> None:
    assert sse_event(b'{"a":1}') == b'event: message\ndata: {"a":1}\n\n'


def test_sse_event_with_an_id() -> None:
    frame = sse_event(b"{}", event_id="42")
    assert frame == b"id: 42\nevent: message\ndata: {}\n\n"
    assert parse_event(frame) == {"id": [b"42"], "event": [b"message"], "data": [b"{}"]}


def test_keepalive_is_a_comment() -> None:
    # A comment line, then the blank line that ends the event: clients dispatch nothing.
    assert SSE_KEEPALIVE.replace(b"\r\n", b"\n") == b":\n\n"


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_any_encoded_message_fits_on_one_data_line(value: Any) -> None:
    data = encode(value)
    frame = sse_event(data)
    fields = parse_event(frame)
    assert fields == {"event": [b"message"], "data": [data]}


def test_newlines_in_strings_do_not_split_the_data_line() -> None:
    data = encode({"text": "line one\nline two\r\nline three\rend\u2028\u2029"})
    fields = parse_event(sse_event(data))
    assert len(fields["data"]) == 1
    assert fields["data"][0] == data
