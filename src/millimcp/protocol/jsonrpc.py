"""JSON-RPC 2.0 envelopes: decoded once, ``params`` kept raw until the method is known.

:func:`decode_message` turns bytes into a :class:`Message` or raises the right
:class:`~millimcp.errors.ProtocolError`; the ``encode_*`` functions turn replies into bytes.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from millimcp.codec import JsonDecodeFailure, check_depth, encode
from millimcp.codec.json import DEFAULT_MAX_DEPTH
from millimcp.errors import InvalidRequest, ParseError, ProtocolError

__all__ = [
    "ABSENT",
    "Message",
    "decode_message",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
]

ABSENT: Final = msgspec.UNSET
_EMPTY: Final = msgspec.Raw(b"")


class Message(msgspec.Struct, forbid_unknown_fields=False):
    """Any inbound JSON-RPC message: request, notification or response.

    ``id`` is :data:`ABSENT` on notifications. ``params``, ``result`` and ``error`` stay raw.
    """

    jsonrpc: str
    method: str | msgspec.UnsetType = msgspec.UNSET
    id: int | str | msgspec.UnsetType | None = msgspec.UNSET
    params: msgspec.Raw = _EMPTY
    result: msgspec.Raw = _EMPTY
    error: msgspec.Raw = _EMPTY

    @property
    def is_request(self) -> bool:
        return self.id is not msgspec.UNSET and self.method is not msgspec.UNSET

    @property
    def is_notification(self) -> bool:
        return self.id is msgspec.UNSET and self.method is not msgspec.UNSET

    @property
    def is_response(self) -> bool:
        return self.method is msgspec.UNSET


class _ResultResponse(msgspec.Struct):
    jsonrpc: str
    id: int | str
    result: Any


class _ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class _ErrorResponse(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    error: _ErrorObject
    id: int | str | msgspec.UnsetType | None = msgspec.UNSET


class _Notification(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    method: str
    params: Any = None


class _Request(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    id: int | str
    method: str
    params: Any = None


_MESSAGE_DECODER: Final = msgspec.json.Decoder(Message)


def decode_message(data: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> Message:
    """Decode one JSON-RPC message, or raise ParseError / InvalidRequest."""
    if not data.isascii():
        # Raw params and skipped fields are not UTF-8-checked by the decoder; check once here.
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"Parse error: invalid UTF-8 at byte {exc.start}") from None
    try:
        message = _MESSAGE_DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"Invalid request: {exc}", request_id=_salvage_id(data)) from None
    except msgspec.DecodeError as exc:
        raise ParseError(f"Parse error: {exc}") from None
    except RecursionError:
        raise ParseError("Parse error: JSON nested too deeply") from None
    if message.jsonrpc != "2.0":
        raise InvalidRequest('Invalid request: "jsonrpc" must be "2.0"', request_id=_id_of(message))
    if message.id is None:
        raise InvalidRequest("Invalid request: the id must not be null")
    if message.method is msgspec.UNSET and not message.result and not message.error:
        raise InvalidRequest(
            "Invalid request: a message needs a method, a result or an error",
            request_id=_id_of(message),
        )
    # The envelope decoder skips params without recursing; the depth cap applies to the rest.
    if len(data) > max_depth:
        try:
            check_depth(data, max_depth)
        except JsonDecodeFailure as exc:
            raise ParseError(f"Parse error: {exc.message}") from None
    return message


def _id_of(message: Message) -> int | str | None:
    return message.id if isinstance(message.id, int | str) else None


class _IdOnly(msgspec.Struct):
    id: int | str | None = None


_ID_DECODER: Final = msgspec.json.Decoder(_IdOnly)


def _salvage_id(data: bytes) -> int | str | None:
    """Best effort to read the id of an invalid request, so its error can carry it."""
    try:
        return _ID_DECODER.decode(data).id
    except (msgspec.DecodeError, RecursionError):
        return None


def encode_result(request_id: int | str, result: Any) -> bytes:
    return encode(_ResultResponse("2.0", request_id, result))


def encode_error(request_id: int | str | msgspec.UnsetType | None, error: ProtocolError) -> bytes:
    """Encode an error reply; ``request_id`` falls back to the one the error carries."""
    if not isinstance(request_id, int | str):
        request_id = error.request_id
    return encode(
        _ErrorResponse(
            "2.0",
            _ErrorObject(error.code, error.message, error.data),
            request_id if request_id is not None else msgspec.UNSET,
        )
    )


def encode_notification(method: str, params: Any = None) -> bytes:
    return encode(_Notification("2.0", method, params))


def encode_request(request_id: int | str, method: str, params: Any = None) -> bytes:
    return encode(_Request("2.0", request_id, method, params))
