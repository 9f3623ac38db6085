"""JSON with msgspec: one shared encoder, cached typed decoders, a nesting-depth cap.

msgspec keeps integers of any size exact (``2**70`` round-trips), rejects ``NaN`` and
``Infinity`` literals and numbers that overflow a float, and refuses invalid UTF-8. What it
does not do on its own is cap nesting below Python's recursion limit, so :func:`check_depth`
does that cheaply: a body with fewer brackets than the cap cannot nest deeper than the cap,
and only the rare body with more brackets is scanned.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Final, TypeVar

import msgspec

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "JsonDecodeFailure",
    "check_depth",
    "decode",
    "decoder_for",
    "encode",
]

T = TypeVar("T")

DEFAULT_MAX_DEPTH: Final = 128
"""Deepest nesting of arrays and objects accepted in one message."""

_ENCODER: Final = msgspec.json.Encoder()
encode: Final = _ENCODER.encode
"""Encode any msgspec-supported value to JSON bytes."""

_ANY_DECODER: Final = msgspec.json.Decoder()

# A JSON string literal, so that brackets inside strings do not count as nesting.
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS: Final = bytes.maketrans(b"", b"")
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


class JsonDecodeFailure(Exception):
    """Raised by :func:`decode` for malformed input; ``kind`` says which of three kinds."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "malformed", "invalid" (valid JSON, wrong shape) or "too_deep"
        self.message = message


def check_depth(data: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
    """Raise :class:`JsonDecodeFailure` if ``data`` nests deeper than ``max_depth``."""
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return
    brackets = _STRING.sub(b"", data).translate(_BRACKETS, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        if byte == 91 or byte == 123:  # [ {
            depth += 1
            if depth > max_depth:
                raise JsonDecodeFailure(
                    "too_deep", f"JSON nested deeper than the limit of {max_depth}"
                )
        else:
            depth -= 1


@lru_cache(maxsize=512)
def decoder_for(type_: Any) -> msgspec.json.Decoder[Any]:
    """A cached decoder that validates into ``type_`` while parsing."""
    return msgspec.json.Decoder(type_)


def decode(data: bytes | memoryview, type_: type[T] | Any = Any) -> T:
    """Decode ``data`` (typed when ``type_`` is given), mapping failures to one exception."""
    decoder = _ANY_DECODER if type_ is Any else decoder_for(type_)  # type: ignore[arg-type]
    try:
        return decoder.decode(data)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        raise JsonDecodeFailure("invalid", str(exc)) from None
    except msgspec.DecodeError as exc:
        raise JsonDecodeFailure("malformed", str(exc)) from None
    except RecursionError:
        raise JsonDecodeFailure("too_deep", "JSON nested too deeply") from None
