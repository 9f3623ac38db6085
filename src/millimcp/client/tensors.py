"""Tensors in ``call_tool``: the client half of the ``dev.millimcp/tensor`` extension.

``call_tool(name, {"image": tensor})`` takes numpy arrays and torch tensors (and ``dict[str,
...]`` of them) as argument values, and :attr:`ToolResult.tensors` holds the result's tensors
by name. How they travel (see ``docs/tensors.md``):

- **raw**, when the client declares the extension (``tensors=True``, the default when numpy
  is installed, over an HTTP link) and the server declared it too (in ``server/discover`` or
  in the ``initialize`` result: both eras): the arguments name their tensors
  (``{"uri": "cid:x"}``) in one safetensors document that goes with the request as its
  attachment (:meth:`ClientTensors.prepare` hands it to the call; the link sends it from the
  tensors' own memory), and a framed reply's attachment (read by the link into one writable
  buffer) holds the result tensors, which are views of it (no copy, no base64);
- **shared memory**, when the client was made with ``shared_memory="auto"`` and the server
  declared ``sharedMemory`` and verified the client's probe segment (same host, same user):
  argument tensors go in one segment the client owns (freed when the call returns), result
  tensors come in a segment the server made for the client, mapped in place and freed once
  mapped (``millimcp.tensor.shm``); no bytes cross the socket;
- **plain MCP** otherwise (stdio, ``tensors=False``, any other server): each argument tensor
  as ``{"blob": <base64 safetensors>, "mimeType": "application/x-safetensors"}``, each result
  tensor from an embedded resource of that media type, whoever sent it.

Every tensor document is read by :func:`millimcp.tensor.wire.unpack` (size caps, dtype
allow-list, exact tiling): forged bytes raise :class:`~millimcp.errors.TensorFormatError`.
A call without tensors costs a scan of its argument values and of its result's content
blocks.

numpy and torch are not imported here: a value is recognised as a tensor by its type, and the
libraries are loaded by ``millimcp.tensor`` when a tensor is encoded or decoded.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib.util
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from millimcp.codec.attachment import ATTACHMENT_MEDIA_TYPE
from millimcp.errors import TensorFormatError
from millimcp.protocol.types import (
    BlobResourceContents,
    EmbeddedResource,
    ResourceLink,
    ServerCapabilities,
)

if TYPE_CHECKING:
    from millimcp.tensor._imports import Kind
    from millimcp.tensor.wire import TensorLimits

__all__ = [
    "ATTACHMENT_MEDIA_TYPE",
    "EXTENSION",
    "MEDIA_TYPE",
    "ClientTensors",
    "DescribedServer",
    "TensorCall",
    "TensorType",
    "available",
]

TensorType = Literal["numpy", "torch"]

EXTENSION: Final = "dev.millimcp/tensor"
"""``millimcp.tensor.EXTENSION``, spelled here so that a client without tensors never imports
the tensor package (a test keeps the two equal)."""
MEDIA_TYPE: Final = "application/x-safetensors"
"""``millimcp.tensor.MEDIA_TYPE``, likewise."""
_CID: Final = "cid:"
_SHM: Final = "shm:"
REPLY_BYTES: Final = 16 << 20
"""Bytes of each result segment a shared-memory client keeps (pages are only allocated when
written; larger results come in a segment of their own)."""
_PLAIN: Final = frozenset({str, int, float, bool, type(None), list})


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


class DescribedServer(Protocol):
    """What the server said of itself (the client's era negotiation keeps it)."""

    @property
    def server_capabilities(self) -> ServerCapabilities: ...


class TensorCall:
    """One ``tools/call`` with tensor arguments: what its result decodes to, and (raw) the
    attachment to send with it."""

    __slots__ = ("kind", "parts", "pool", "segment")

    def __init__(
        self, kind: Kind, parts: list[Any] | None, segment: Any = None, pool: Any = None
    ) -> None:
        self.kind: Kind = kind
        self.parts = parts
        """The request's attachment (a tensor document as buffers), or None (base64)."""
        self.segment = segment
        """The shared-memory segment holding the argument tensors (given back to ``pool`` by
        :meth:`release`)."""
        self.pool = pool

    def release(self) -> None:
        """Give the arguments' segment back, if any: the server is done with it."""
        segment, self.segment = self.segment, None
        if segment is not None:
            self.pool.give(segment)

    def abandon(self) -> None:
        """The server may read the arguments later (a task): their segment is never reused,
        and freed when the client closes."""
        segment, self.segment = self.segment, None
        if segment is not None:
            self.pool.retire(segment)

    def __repr__(self) -> str:
        sent = 0 if self.parts is None else sum(len(p) for p in self.parts)
        return f"<TensorCall {self.kind} raw={self.parts is not None} bytes={sent}>"


class ClientTensors:
    """The client's tensor codec: arguments out, result tensors in."""

    __slots__ = (
        "_arguments",
        "_probe",
        "_received",
        "_replies",
        "declare",
        "limits",
        "shared_memory",
        "tensor_type",
    )

    def __init__(
        self,
        *,
        declare: bool,
        tensor_type: TensorType | None = None,
        limits: TensorLimits | None = None,
        shared_memory: bool = False,
    ) -> None:
        if tensor_type not in (None, "numpy", "torch"):
            raise ValueError(f"tensor_type must be 'numpy', 'torch' or None, not {tensor_type!r}")
        self.declare = declare
        """Whether the client declares the extension (raw tensors over HTTP)."""
        self.tensor_type: TensorType | None = tensor_type
        self.limits = limits
        """Caps for tensor documents (``millimcp.tensor.TensorLimits``; None: the defaults)."""
        self.shared_memory = shared_memory and declare
        self._probe: Any = None
        self._arguments: Any = None
        """Segments for argument tensors, reused call after call (``shm.SegmentPool``)."""
        self._replies: Any = None
        """Segments the server fills with results, declared in the capability."""
        self._received: set[str] = set()
        """Result segments decoded whose tensors may still be in use."""

    def __repr__(self) -> str:
        return f"<ClientTensors declare={self.declare} tensor_type={self.tensor_type}>"

    def capability(self) -> dict[str, Any]:
        """What the client declares under ``capabilities.extensions`` (with shared memory: a
        probe segment, made now, that a server on this host can open)."""
        if not self.shared_memory:
            return {EXTENSION: {}}
        shm = _shm()
        if not shm.available():
            self.shared_memory = False
            return {EXTENSION: {}}
        shm.sweep()  # segments of earlier clients that died
        self._probe, token = shm.create_probe()
        self._arguments = shm.SegmentPool(keep=4, lent=False)  # only the server reads them
        self._replies = shm.SegmentPool(keep=4, capacity=REPLY_BYTES)
        names = [segment.name for segment in self._replies.reserve()]
        offer = {"probe": self._probe.name, "token": token, "replyTo": names}
        return {EXTENSION: {"sharedMemory": {**offer, "replyBytes": REPLY_BYTES}}}

    def close(self) -> None:
        """Free the probe and the pooled segments."""
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.close()
            self._arguments.close()
            self._replies.close()

    def prepare(
        self,
        arguments: Mapping[str, Any] | None,
        tensor_type: TensorType | None,
        server: DescribedServer,
    ) -> tuple[Mapping[str, Any] | None, TensorCall | None]:
        """The arguments to send, tensors replaced by their JSON form, and a
        :class:`TensorCall` when there were tensors (its ``parts``: the attachment to send,
        when raw; then pass it to :meth:`decode`). Raw when the client declares the
        extension and so did the ``server`` (its ``capabilities.extensions``, from either
        era; read only when there are tensors)."""
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
        extensions = server.server_capabilities.extensions or {}
        raw = self.declare and EXTENSION in extensions
        kind = tensor_type or self.tensor_type or found
        if raw and self._probe is not None and _offers_shared_memory(extensions):
            if self._received:  # results let go since: the server refills the same segment
                self._replies.reclaim(self._received)
            encoded, parts = _tensor()[1].encode_arguments(arguments, True)
            assert parts is not None
            return _into_segment(encoded, parts, kind, self._arguments)
        encoded, parts = _tensor()[1].encode_arguments(arguments, raw)
        return encoded, TensorCall(kind, parts)

    def decode(
        self,
        content: list[Any],
        call: TensorCall | None,
        tensor_type: TensorType | None,
        attachment: memoryview | None,
    ) -> dict[str, Any] | None:
        """The result's tensors by name (None when it has none): ``cid:`` links into the raw
        reply's ``attachment``, ``shm:`` links to segments made for this client, and embedded
        ``application/x-safetensors`` blobs. Frees the call's argument segment, if any."""
        if call is not None and call.segment is not None:
            call.release()
        if self._received:
            self._replies.reclaim(self._received)  # results no longer used: refillable
        out: dict[str, Any] | None = None
        shared: dict[str, Any] | None = None
        segments: dict[str, dict[str, Any]] | None = None
        kind: Kind | None = None
        for block in content:
            cls = type(block)
            if cls is ResourceLink:
                if block.mime_type != MEDIA_TYPE:
                    continue
                if block.uri.startswith(_SHM) and self._probe is not None:
                    if kind is None:
                        kind = self._kind(call, tensor_type)
                    segments = {} if segments is None else segments
                    name, tensor = self._shared(block, kind, segments)
                    out = _add(out, name, tensor)
                    continue
                if not block.uri.startswith(_CID):
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

    def _shared(
        self, block: Any, kind: Kind, segments: dict[str, dict[str, Any]]
    ) -> tuple[str, Any]:
        """A result tensor in a segment the server made for this client: mapped in place,
        its name freed at once (this process owns it)."""
        segment_name, _, name = block.uri[len(_SHM) :].partition("#")
        tensors = segments.get(segment_name)
        if tensors is None:
            meta = (block.meta or {}).get(EXTENSION) or {}
            pooled = self._replies.find(segment_name)
            if pooled is not None:  # one of ours, refilled: views of it, freed when unused
                self._received.add(segment_name)
                tensors = _unpack(pooled.document(meta.get("documentBytes")), kind, self.limits)
            else:
                limits = self.limits or _tensor()[2].DEFAULT_LIMITS
                cap = _shm().HEADER_BYTES + 8 + limits.max_header_bytes + limits.max_bytes
                segment = _shm().Segment.attach(
                    segment_name, meta.get("segmentBytes"), max_bytes=cap, claim=True
                )
                try:
                    document = segment.document(meta.get("documentBytes"))
                    tensors = _unpack(document, kind, self.limits)
                    del document
                finally:
                    segment.close()  # unmapped when the last tensor viewing it goes
            segments[segment_name] = tensors
        if name not in tensors:
            raise TensorFormatError(f"no tensor named {name!r} in segment {segment_name}")
        return name, tensors[name]

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


def _shm() -> ModuleType:
    from millimcp.tensor import shm

    return shm


def _offers_shared_memory(extensions: Mapping[str, Any]) -> bool:
    declared = extensions.get(EXTENSION)
    if type(declared) is not dict and not isinstance(declared, Mapping):
        return False
    offer = declared.get("sharedMemory")
    return type(offer) is dict or isinstance(offer, Mapping)


def _into_segment(
    encoded: dict[str, Any], parts: list[Any], kind: Kind, pool: Any
) -> tuple[dict[str, Any], TensorCall]:
    """The arguments' tensor document copied into a pooled segment (one copy), and the
    arguments rewritten from ``cid:<name>`` to ``shm:<segment>#<name>``."""
    size = sum(map(len, parts))  # bytes, and 1-D byte views (wire.pack's parts)
    segment = pool.take(size)
    nbytes = _shm().fill(segment, parts)

    def moved(value: Any) -> Any:
        if type(value) is dict and set(value) == {"uri"} and value["uri"].startswith(_CID):
            uri = f"{_SHM}{segment.name}#{value['uri'][len(_CID) :]}"
            return {"uri": uri, "size": segment.size, "documentBytes": nbytes}
        if type(value) is dict:
            return {k: moved(v) for k, v in value.items()}
        return value

    return {k: moved(v) for k, v in encoded.items()}, TensorCall(kind, None, segment, pool)


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
