"""JSON-RPC 2.0 envelopes: decoded once, ``params`` kept raw until the method is known.

:func:`decode_message` turns bytes into a :class:`Message` or raises the right
:class:`~millimcp.errors.ProtocolError`; the ``encode_*`` functions turn replies into bytes.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from millimcp.codec import JsonDecodeFailure, check_depth, encode
from millimcp.codec.json import DEFAULT_MAX_DEPTH
from millimcp.errors import (
    InternalError,
    InvalidRequest,
    ParseError,
    ProtocolError,
    error_from_code,
)

__all__ = [
    "ABSENT",
    "ENVELOPE_TEXT",
    "ErrorObject",
    "Message",
    "RequestDecoder",
    "check_nesting",
    "check_utf8",
    "decode_error",
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


class ErrorObject(msgspec.Struct):
    """A JSON-RPC error object, as sent and as read.

    ``code`` and ``message`` are always written; a peer that leaves them out is read with the
    defaults. ``data`` is left out when unset.
    """

    code: int = InternalError.code
    message: str = ""
    data: Any = msgspec.UNSET

    @property
    def details(self) -> Any:
        """``data``, or None when the peer sent none."""
        return None if self.data is msgspec.UNSET else self.data

    def exception(self) -> ProtocolError:
        """The :class:`~millimcp.errors.ProtocolError` this object stands for."""
        return error_from_code(self.code, self.message, self.details)


_ERROR_DECODER: Final = msgspec.json.Decoder(ErrorObject)


def decode_error(raw: bytes) -> ErrorObject:
    """The error object of a response (``Message.error``, raw); a malformed one reads as an
    internal error that says so, never as an exception: a reply is read to its end."""
    try:
        return _ERROR_DECODER.decode(raw)
    except msgspec.DecodeError:
        return ErrorObject(InternalError.code, "the peer sent a malformed error object")


class _ErrorResponse(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    error: ErrorObject
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


def check_utf8(data: bytes) -> None:
    """Raise ParseError for invalid UTF-8 anywhere in ``data``.

    The decoders do not check what they skip (raw params, unknown keys), so this runs first.
    """
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"Parse error: invalid UTF-8 at byte {exc.start}") from None


def check_nesting(data: bytes, max_depth: int) -> None:
    """Raise ParseError when ``data`` nests deeper than ``max_depth``.

    A body with fewer brackets than the limit cannot nest past it: counting them (in C) is
    all most bodies cost.
    """
    if len(data) > max_depth and data.count(b"[") + data.count(b"{") > max_depth:
        try:
            check_depth(data, max_depth)
        except JsonDecodeFailure as exc:
            raise ParseError(f"Parse error: {exc.message}") from None


ENVELOPE_TEXT: Final = len(b'"jsonrpc":"2.0""id":"method":"""params":')
"""Bytes of a request's envelope that are text, not brackets, method name aside: a decoded
request of ``n`` bytes with method ``m`` nests at most ``(n - ENVELOPE_TEXT - len(m)) / 2``
deep (each bracket that opens one closes), so shorter ones need no depth scan."""


# gc=False: a request is dropped as soon as its params are read; it is never in a cycle.
class _TypedRequest(msgspec.Struct, tag_field="method", forbid_unknown_fields=False, gc=False):
    jsonrpc: str
    id: int | str


class _NamedRequest(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    """A request whose method the binding names already (``Mcp-Method``): no union to pick."""

    jsonrpc: str
    id: int | str
    method: str


class RequestDecoder:
    """The fast path: a well-formed request decoded in one pass, params typed by method.

    The ``method`` field is a tagged-union tag, so msgspec picks the params type from it
    while parsing. Anything else (notifications, responses, unknown methods, any invalid
    field) makes :meth:`decode` return None, and the caller takes the general path
    (:func:`decode_message`), which says precisely what is wrong.

    When the binding names the method beforehand (HTTP's ``Mcp-Method``), that method's own
    type is tried first: no union to resolve, so cheaper; a body that disagrees with the hint
    takes the union as before.
    """

    __slots__ = ("_decoder", "_methods", "named")

    def __init__(self, params_types: dict[str, type[Any]]) -> None:
        types: list[type[Any]] = []
        self._methods: dict[type[Any], str] = {}
        self.named: dict[str | None, msgspec.json.Decoder[Any]] = {}
        """Each method's own decoder, for a caller that inlines :meth:`decode`'s hinted path
        (the HTTP endpoint): a decoded request is valid when its ``method`` is the hint and
        its ``jsonrpc`` is ``"2.0"``; a body that fails takes :meth:`decode` without hint.
        Keyed ``str | None`` so that an absent hint looks up nothing without a test."""
        for index, (method, params_type) in enumerate(params_types.items()):
            request_type = msgspec.defstruct(
                f"Request{index}",
                [("params", params_type)],
                bases=(_TypedRequest,),
                tag=method,
                kw_only=True,
            )
            types.append(request_type)
            self._methods[request_type] = method
            named = msgspec.defstruct(
                f"NamedRequest{index}", [("params", params_type)], bases=(_NamedRequest,)
            )
            self.named[method] = msgspec.json.Decoder(named)
        union: Any = types[0]
        for request_type in types[1:]:
            union = union | request_type
        self._decoder = msgspec.json.Decoder(union)

    def decode(self, data: bytes, hint: str | None = None) -> tuple[str, int | str, Any] | None:
        """(method, id, params) of a valid request, else None. Check UTF-8 first.

        ``hint``: the method the binding names (``Mcp-Method``), tried first."""
        if hint is not None and (named := self.named.get(hint)) is not None:
            try:
                request = named.decode(data)
            except (msgspec.DecodeError, RecursionError):
                pass
            else:
                if request.method == hint and request.jsonrpc == "2.0":
                    return hint, request.id, request.params
        try:
            request = self._decoder.decode(data)
        except (msgspec.DecodeError, RecursionError):
            return None
        if request.jsonrpc != "2.0":
            return None
        return self._methods[type(request)], request.id, request.params


def decode_message(data: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> Message:
    """Decode one JSON-RPC message, or raise ParseError / InvalidRequest."""
    if not data.isascii():  # check_utf8's own test, inline: most messages are ASCII
        check_utf8(data)
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
    if len(data) > max_depth:  # check_nesting's own test, inline: most messages are short
        check_nesting(data, max_depth)
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


_RESULT_HEAD: Final = b'{"jsonrpc":"2.0","id":'
_RESULT_KEY: Final = b',"result":'
_RAW: Final = msgspec.Raw


def encode_result(request_id: int | str, result: Any) -> bytes:
    """The reply to a request. A result already encoded (a :class:`msgspec.Raw`, such as a
    :class:`~millimcp.protocol.types.TextResultTemplate`'s) goes in as it is, the envelope
    built around it by concatenation."""
    if type(result) is _RAW:
        return b"".join((_RESULT_HEAD, encode(request_id), _RESULT_KEY, result, b"}"))
    return encode(_ResultResponse("2.0", request_id, result))


def encode_error(request_id: int | str | msgspec.UnsetType | None, error: ProtocolError) -> bytes:
    """Encode an error reply; ``request_id`` falls back to the one the error carries."""
    if not isinstance(request_id, int | str):
        request_id = error.request_id
    return encode(
        _ErrorResponse(
            "2.0",
            ErrorObject(
                error.code, error.message, msgspec.UNSET if error.data is None else error.data
            ),
            request_id if request_id is not None else msgspec.UNSET,
        )
    )


def encode_notification(method: str, params: Any = None) -> bytes:
    return encode(_Notification("2.0", method, params))


def encode_request(request_id: int | str, method: str, params: Any = None) -> bytes:
    return encode(_Request("2.0", request_id, method, params))
