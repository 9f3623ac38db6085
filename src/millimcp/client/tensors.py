"""Tensors in ``call_tool``: the client half of the ``dev.millimcp/tensor`` extension.

``call_tool(name, {"image": tensor})`` takes numpy arrays and torch tensors (and ``dict[str,
...]`` of them) as argument values, and :attr:`ToolResult.tensors` holds the result's tensors
by name. How they travel (see ``docs/tensors.md``):

- **raw**, when the client declares the extension (``Client.over_http(..., tensors=True)``,
  the default when numpy is installed) and the server declared it in ``server/discover``
  (the modern era, over HTTP): the request body is the extension's framing (the JSON-RPC
  message, then one safetensors document holding every argument tensor, sent from the
  tensors' own memory), and a framed reply is read into one writable buffer whose views are
  the result tensors (no copy, no base64);
- **plain MCP** otherwise (stdio, the handshake era, ``tensors=False``, any other server):
  each argument tensor as ``{"blob": <base64 safetensors>, "mimeType":
  "application/x-safetensors"}``, each result tensor from an embedded resource of that media
  type, whoever sent it.

The handshake era stays on base64 although the client declares the extension in
``initialize`` too: millimcp's server accepts a framed body there but does not hand its
attachment to the tool (its handshake-era context has no exchange), so raw arguments would
fail, and it never replies raw in that era.

Every tensor document is read by :func:`millimcp.tensor.wire.unpack` (size caps, dtype
allow-list, exact tiling): forged bytes raise :class:`~millimcp.errors.TensorFormatError`.

The per-call state shared with the HTTP link (the attachment to send, the one received) lives
in two context variables: the link runs in the caller's task, so the
:class:`~millimcp.client.link.Link` interface carries nothing new. The attachment to send is
set only for the duration of a raw call with tensor arguments; the one received is set by the
link when a framed reply comes and taken by ``decode`` (or dropped by the next ``prepare``
when the call failed first). A call without tensors costs a scan of its argument values and
of its result's content blocks, and two context lookups.

numpy and torch are not imported here: a value is recognised as a tensor by its type, and the
libraries are loaded by ``millimcp.tensor`` when a tensor is encoded or decoded.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import functools
import importlib.util
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Literal

from millimcp.codec.attachment import ATTACHMENT_MEDIA_TYPE, AttachmentFramingError, frame, split
from millimcp.errors import ConnectionLost, FrameTooLarge, TensorFormatError
from millimcp.protocol.types import BlobResourceContents, EmbeddedResource, ResourceLink

if TYPE_CHECKING:
    import aiohttp

    from millimcp.client.core import Core
    from millimcp.tensor._imports import Kind
    from millimcp.tensor.wire import TensorLimits

__all__ = [
    "ACCEPT",
    "ATTACHMENT_MEDIA_TYPE",
    "DEFAULT_MAX_ATTACHMENT_BYTES",
    "EXTENSION",
    "MEDIA_TYPE",
    "ClientTensors",
    "TensorCall",
    "TensorType",
    "available",
    "outgoing",
    "read_framed",
]

TensorType = Literal["numpy", "torch"]

EXTENSION: Final = "dev.millimcp/tensor"
"""``millimcp.tensor.EXTENSION``, spelled here so that a client without tensors never imports
the tensor package (a test keeps the two equal)."""
MEDIA_TYPE: Final = "application/x-safetensors"
"""``millimcp.tensor.MEDIA_TYPE``, likewise."""

ACCEPT: Final = f"application/json, text/event-stream, {ATTACHMENT_MEDIA_TYPE}"
"""The ``Accept`` header of a client that declared the extension."""
DEFAULT_MAX_ATTACHMENT_BYTES: Final = 256 * 1024 * 1024
"""The largest framed reply (JSON part and tensors) the HTTP link reads."""
LARGE_BODY: Final = 1 << 20
"""Request bodies above this go out as a list of buffers (aiohttp warns about large bytes)."""
_CID: Final = "cid:"
_PLAIN: Final = frozenset({str, int, float, bool, type(None), list})

_SENDING: Final[contextvars.ContextVar[list[Any] | None]] = contextvars.ContextVar(
    "millimcp.client.tensors_sending", default=None
)
"""The attachment of the raw ``tools/call`` in progress (set only while one is)."""
_RECEIVED: Final[contextvars.ContextVar[memoryview | None]] = contextvars.ContextVar(
    "millimcp.client.tensors_received", default=None
)
"""The attachment of the last framed reply (set by the link, taken by ``decode``)."""


@functools.cache
def _tensor() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``millimcp.tensor``'s ``_imports``, ``extension`` and ``wire``, imported when a call
    first carries a tensor (the package loads its model-hosting modules too)."""
    from millimcp.tensor import _imports, extension, wire

    return _imports, extension, wire


@functools.cache
def available() -> bool:
    """Whether tensors can be encoded here: numpy is installed (torch needs it too). Looked
    up without importing it."""
    return importlib.util.find_spec("numpy") is not None


class TensorCall:
    """One ``tools/call`` with tensor arguments: what its result decodes to, and (raw) the
    attachment the HTTP link sends, bound to the caller's context until :meth:`close`."""

    __slots__ = ("kind", "parts", "token")

    def __init__(self, kind: Kind, parts: list[Any] | None) -> None:
        self.kind: Kind = kind
        self.parts = parts
        """The request's attachment (a tensor document as buffers), or None (base64)."""
        self.token = None if parts is None else _SENDING.set(parts)

    def __repr__(self) -> str:
        sent = 0 if self.parts is None else sum(len(p) for p in self.parts)
        return f"<TensorCall {self.kind} raw={self.parts is not None} bytes={sent}>"

    def close(self) -> None:
        if self.token is not None:
            _SENDING.reset(self.token)
            self.token = None


class ClientTensors:
    """The client's tensor codec: arguments out, result tensors in."""

    __slots__ = ("declare", "limits", "tensor_type")

    def __init__(
        self,
        *,
        declare: bool,
        tensor_type: TensorType | None = None,
        limits: TensorLimits | None = None,
    ) -> None:
        if tensor_type not in (None, "numpy", "torch"):
            raise ValueError(f"tensor_type must be 'numpy', 'torch' or None, not {tensor_type!r}")
        self.declare = declare
        """Whether the client declares the extension (raw tensors over HTTP)."""
        self.tensor_type: TensorType | None = tensor_type
        self.limits = limits
        """Caps for tensor documents (``millimcp.tensor.TensorLimits``; None: the defaults)."""

    def __repr__(self) -> str:
        return f"<ClientTensors declare={self.declare} tensor_type={self.tensor_type}>"

    @staticmethod
    def capability() -> dict[str, Any]:
        """What the client declares under ``capabilities.extensions``."""
        return {EXTENSION: {}}

    def prepare(
        self, core: Core, arguments: Mapping[str, Any] | None, tensor_type: TensorType | None
    ) -> tuple[Mapping[str, Any] | None, TensorCall | None]:
        """The arguments to send, tensors replaced by their JSON form, and a
        :class:`TensorCall` when there were tensors (for :meth:`decode`; the caller closes it
        when the call is over)."""
        if _RECEIVED.get() is not None:  # left by a call that failed before decoding
            _RECEIVED.set(None)
        if not arguments:
            return arguments, None
        for value in arguments.values():  # the common case, inline: no tensor at all
            if type(value) not in _PLAIN:
                break
        else:
            return arguments, None
        found = _first_tensor(arguments)
        if found is None:
            return arguments, None
        raw = (
            self.declare
            and core.era == "modern"  # millimcp's handshake-era path drops attachments
            and EXTENSION in (core.server_capabilities.extensions or ())
        )
        encoded, parts = _tensor()[1].encode_arguments(arguments, raw)
        return encoded, TensorCall(tensor_type or self.tensor_type or found, parts)

    def decode(
        self, content: list[Any], call: TensorCall | None, tensor_type: TensorType | None
    ) -> dict[str, Any] | None:
        """The result's tensors by name (None when it has none): ``cid:`` links into the raw
        reply's attachment (taken from the context here), and embedded
        ``application/x-safetensors`` blobs."""
        attachment = _RECEIVED.get()
        if attachment is not None:
            _RECEIVED.set(None)
        out: dict[str, Any] | None = None
        shared: dict[str, Any] | None = None
        kind: Kind | None = None
        for block in content:
            cls = type(block)
            if cls is ResourceLink:
                if block.mime_type != MEDIA_TYPE or not block.uri.startswith(_CID):
                    continue
                if kind is None:
                    kind = self._kind(call, tensor_type)
                if shared is None:
                    if attachment is None:
                        raise TensorFormatError(
                            "the result links to cid: tensors but no attachment came"
                        )
                    shared = _unpack(attachment, kind, self.limits)
                name = block.uri[len(_CID) :]
                if name not in shared:
                    raise TensorFormatError(f"no tensor named {name!r} in the reply's attachment")
                out = _add(out, name, shared[name])
            elif cls is EmbeddedResource:
                resource = block.resource
                if type(resource) is not BlobResourceContents or resource.mime_type != MEDIA_TYPE:
                    continue
                if kind is None:
                    kind = self._kind(call, tensor_type)
                for name, tensor in _unpack(self._blob(resource.blob), kind, self.limits).items():
                    out = _add(out, name, tensor)
        return out

    def _kind(self, call: TensorCall | None, tensor_type: TensorType | None) -> Kind:
        if call is not None:
            return call.kind
        return tensor_type or self.tensor_type or "numpy"

    def _blob(self, blob: str) -> bytearray:
        limits = self.limits or _tensor()[2].DEFAULT_LIMITS
        if len(blob) // 4 * 3 > 8 + limits.max_header_bytes + limits.max_bytes:
            raise TensorFormatError("a base64 tensor blob is over the tensor size limits")
        try:
            return bytearray(base64.b64decode(blob, validate=True))
        except (binascii.Error, ValueError):
            raise TensorFormatError("a tensor blob is not valid base64") from None


def _first_tensor(arguments: Mapping[str, Any]) -> Kind | None:
    """The library of the first tensor among the argument values (or in a dict value)."""
    for value in arguments.values():
        cls = type(value)
        if cls in _PLAIN:
            continue
        for item in value.values() if cls is dict else (value,):
            module = type(item).__module__
            if module == "numpy" or module.startswith("torch"):
                kind: Kind | None = _tensor()[0].kind_of(item)
                if kind is not None:
                    return kind
    return None


def _add(out: dict[str, Any] | None, name: str, tensor: Any) -> dict[str, Any]:
    if out is None:
        return {name: tensor}
    if name in out:
        raise TensorFormatError(f"the result holds two tensors named {name!r}")
    out[name] = tensor
    return out


def _unpack(buffer: Any, kind: Kind, limits: TensorLimits | None) -> dict[str, Any]:
    """``unpack``, except that bfloat16 tensors come as torch tensors when numpy is asked for
    (numpy has no bfloat16)."""
    imports, _, wire = _tensor()
    limits = limits or wire.DEFAULT_LIMITS
    try:
        tensors: dict[str, Any] = wire.unpack(buffer, kind, limits)
        return tensors
    except TensorFormatError as exc:
        if kind != "numpy" or all(e.dtype != "BF16" for e in wire.read_header(buffer, limits)[1]):
            raise
        try:
            torch = imports.load_torch()
        except ImportError:
            raise exc from None
    tensors = wire.unpack(buffer, "torch", limits)
    return {name: t if t.dtype == torch.bfloat16 else t.numpy() for name, t in tensors.items()}


# -- the HTTP link's side ---------------------------------------------------------------------


@functools.cache
def _payload_class() -> type[Any]:
    """An aiohttp payload written as a list of buffers, never joined (made on first use)."""
    import aiohttp.payload

    class BufferList(aiohttp.payload.Payload):
        _autoclose = True

        def __init__(self, parts: list[Any], content_type: str) -> None:
            super().__init__(parts, content_type=content_type)
            self._size = sum(len(p) for p in parts)

        def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
            return b"".join(self._value).decode(encoding, errors)

        async def write(self, writer: Any) -> None:
            for part in self._value:
                await writer.write(part)

        async def write_with_length(self, writer: Any, content_length: int | None) -> None:
            await self.write(writer)

    return BufferList


def outgoing(body: bytes, method: str | None) -> tuple[Any, str | None]:
    """What the HTTP link posts for ``body`` and its Content-Type (None: the usual): the
    ``tools/call`` of a raw call in progress framed with its attachment, sent as a list of
    buffers (the tensors from their own memory; not another request the call makes, such as
    ``tools/list``); other large bodies as a buffer list too; else ``body`` itself."""
    parts = _SENDING.get()
    if parts is not None and method == "tools/call":
        return _payload_class()(frame(body, parts), ATTACHMENT_MEDIA_TYPE), ATTACHMENT_MEDIA_TYPE
    if len(body) > LARGE_BODY:
        return _payload_class()([body], "application/json"), None
    return body, None


async def read_framed(
    response: aiohttp.ClientResponse, max_message_bytes: int, max_bytes: int
) -> bytes:
    """Read a framed reply into one writable buffer and return its JSON part; the attachment
    is kept in the caller's context for ``decode``, whose tensors are views of the buffer."""
    coding = response.headers.get("Content-Encoding")
    if coding is not None and coding.strip().lower() != "identity":
        raise TensorFormatError(f"a reply with an attachment came with Content-Encoding {coding}")
    length = response.content_length
    if length is not None:
        if length > max_bytes:
            raise FrameTooLarge(max_bytes)
        buffer = bytearray(length)
        view = memoryview(buffer)
        filled = 0
        async for chunk in response.content.iter_any():
            end = filled + len(chunk)
            if end > length:
                raise ConnectionLost("the reply ran past its Content-Length")
            view[filled:end] = chunk
            filled = end
        if filled != length:
            raise ConnectionLost("the reply ended before its Content-Length")
    else:
        buffer = bytearray()
        async for chunk in response.content.iter_any():
            buffer += chunk
            if len(buffer) > max_bytes:
                raise FrameTooLarge(max_bytes)
    try:
        message, attachment = split(buffer, max_message_bytes)
    except AttachmentFramingError as exc:
        raise TensorFormatError(f"a framed reply is malformed: {exc}") from None
    _RECEIVED.set(attachment)  # the caller's context: the link runs in the caller's task
    return message
