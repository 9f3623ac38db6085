"""The ``dev.millimcp/tensor`` extension: how tensors sit in MCP messages, both directions.

A tensor value in tool **arguments** is a JSON object (see :func:`tensor_schema`):

- ``{"blob": "<base64>", "mimeType": "application/x-safetensors"}``: a safetensors document
  holding one tensor, base64 (what any MCP client can send);
- ``{"uri": "cid:<name>"}``: the tensor named ``<name>`` in the request's attachment, a
  safetensors document sent raw in the same HTTP body (the extension's framing).

A tensor in a tool **result** is one content block per tensor (named ``result`` for a single
tensor, by key for a dict):

- for a peer that declared the extension over HTTP: a ``resource_link`` to ``cid:<name>``
  whose bytes are in the response's attachment;
- for every other peer (and over stdio, and on an SSE stream): an embedded resource whose
  ``blob`` is base64 of a safetensors document holding that one tensor, with mimeType
  ``application/x-safetensors``.

**Shared memory** (same-host peers, both sides opting in): the client declares
``{"sharedMemory": {"probe": <segment name>, "token": <hex>}}`` in its extension capability;
a server that can open that segment and finds the token there shares the host (see
:mod:`millimcp.tensor.shm`). Then a tensor argument may be ``{"uri": "shm:<segment>#<name>",
"size": <segment bytes>}`` (a tensor document in a segment the client owns and frees after
the call), and result tensors are ``resource_link`` blocks to ``shm:<segment>#<name>`` (a
segment the server creates owned by the client, which frees it once mapped; the size is in
``_meta``). Every name and size is checked as forged input; a server that cannot verify the
probe, or a peer on another host, uses the forms above.

Either way the JSON-RPC message is a valid MCP message. Each block's ``_meta`` under the
extension key gives the tensor's name, dtype and shape. This module serves the server and the
client alike: ``encode_arguments``/``decode_arguments`` and ``encode_result``/``decode_result``.
"""

from __future__ import annotations

import base64
import os
import typing
from collections.abc import Mapping
from typing import Any, Final

import msgspec

import millimcp.tensor.shm as _shm
from millimcp.codec.attachment import ATTACHMENT_MEDIA_TYPE
from millimcp.errors import TensorFormatError
from millimcp.protocol.types import (
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ResourceLink,
)
from millimcp.tensor._imports import Kind, is_tensor, kind_of, tensor_kind
from millimcp.tensor.shm_peers import PEERS
from millimcp.tensor.wire import DEFAULT_LIMITS, DTYPES, MEDIA_TYPE, TensorLimits, pack, unpack

__all__ = [
    "EXTENSION",
    "RequestAttachment",
    "SharedPeer",
    "TensorParam",
    "TensorValue",
    "capability",
    "decode_result",
    "encode_arguments",
    "encode_result",
    "is_tensor_result",
    "peer_accepts",
    "shared_memory_peer",
    "tensor_param",
    "tensor_return",
    "tensor_schema",
]

EXTENSION: Final = "dev.millimcp/tensor"
CID: Final = "cid:"
RESULT_NAME: Final = "result"


class TensorValue(msgspec.Struct, kw_only=True, rename="camel"):
    """A tensor in tool arguments, as it arrives: a base64 document or a reference."""

    blob: bytearray | None = None
    """A safetensors document of one tensor; msgspec decodes the base64 into a writable buffer."""
    uri: str | None = None
    mime_type: str | None = None
    size: int | None = None
    """With a ``shm:`` uri: the bytes of the segment (checked against the file)."""
    document_bytes: int | None = None
    """With a ``shm:`` uri: the bytes of the tensor document after the control block."""


def capability() -> dict[str, Any]:
    """What a server declares under ``capabilities.extensions``."""
    declared: dict[str, Any] = {
        "mediaType": ATTACHMENT_MEDIA_TYPE,
        "tensorMediaType": MEDIA_TYPE,
        "dtypes": list(DTYPES),
    }
    if _shm.available():
        declared["sharedMemory"] = {"pid": os.getpid()}
    return declared


class SharedPeer(msgspec.Struct, frozen=True):
    """A client that proved it shares this host: its pid, and the segments it keeps for
    results (``replyTo``, each ``replyBytes`` after the control block)."""

    pid: int
    replies: tuple[str, ...] = ()
    reply_bytes: int = 0


def shared_memory_peer(extensions: Mapping[str, Any] | None) -> SharedPeer | None:
    """A client that declared shared memory and proved it shares this host (its probe
    segment opened, its token matched), else None. Its ``replies`` are only the names that
    carry its pid (the server never writes into another's segment). Answers are remembered
    (1,024 at most): a client states the same offer on every request."""
    if extensions is None:
        return None
    declared = extensions.get(EXTENSION)
    if type(declared) is not dict and not isinstance(declared, Mapping):
        return None  # (decoded JSON: a dict, checked first; the ABC check is slow)
    offer = declared.get("sharedMemory")
    if type(offer) is not dict and not isinstance(offer, Mapping):
        return None
    probe, token = offer.get("probe"), offer.get("token")
    replies, size = offer.get("replyTo"), offer.get("replyBytes")
    if type(replies) is not list or type(size) is not int:
        replies, size = [], 0
    key = (probe, token, tuple(replies[:16]), size)
    try:
        return _OFFERS[key]
    except (KeyError, TypeError):  # TypeError: a name that is no string (unhashable)
        pass
    pid = _shm.verify_probe(probe, token)
    peer = None if pid is None else SharedPeer(pid, _own(replies[:16], pid), size)
    if type(probe) is str and type(token) is str and all(type(n) is str for n in key[2]):
        if len(_OFFERS) >= 1024:
            _OFFERS.clear()
        _OFFERS[key] = peer
    return peer


_OFFERS: Final[dict[tuple[Any, ...], SharedPeer | None]] = {}


def _own(names: list[Any], pid: int) -> tuple[str, ...]:
    """The segment names among ``names`` that are valid and owned by ``pid``."""
    own = []
    for name in names:
        try:
            if type(name) is str and _shm.owner_of(name) == pid:
                own.append(name)
        except TensorFormatError:
            continue
    return tuple(own)


def peer_accepts(extensions: Mapping[str, Any] | None) -> bool:
    """Whether a peer's ``capabilities.extensions`` declares this extension."""
    return extensions is not None and EXTENSION in extensions


def tensor_schema(kind: Kind) -> dict[str, Any]:
    """The JSON schema of one tensor argument."""
    library = "numpy.ndarray" if kind == "numpy" else "torch.Tensor"
    return {
        "type": "object",
        "description": (
            f"A tensor ({library}): a safetensors document holding one tensor, base64 in "
            f"'blob'; or, with the {EXTENSION} extension, 'uri' \"cid:<name>\" naming a tensor "
            "in the request's binary attachment."
        ),
        "properties": {
            "blob": {
                "type": "string",
                "contentEncoding": "base64",
                "contentMediaType": MEDIA_TYPE,
            },
            "uri": {"type": "string", "pattern": "^cid:"},
            "mimeType": {"type": "string", "const": MEDIA_TYPE},
        },
        "oneOf": [{"required": ["blob"]}, {"required": ["uri"]}],
        "x-millimcp-tensor": {"library": kind},
    }


class RequestAttachment:
    """The tensors of one request's attachment, decoded on first use (zero-copy views), and
    of its shared-memory segments when the peer proved it shares the host."""

    __slots__ = ("_segments", "_tensors", "limits", "shared", "view")

    def __init__(
        self,
        view: memoryview | None,
        limits: TensorLimits = DEFAULT_LIMITS,
        *,
        shared: bool = False,
    ) -> None:
        self.view = view
        self.limits = limits
        self.shared = shared
        """Whether ``shm:`` arguments are accepted (the peer's probe was verified)."""
        self._tensors: dict[str, Any] | None = None
        self._segments: dict[str, dict[str, Any]] | None = None

    def get_shared(self, uri: str, size: int | None, nbytes: int | None, kind: Kind) -> Any:
        """The tensor ``shm:<segment>#<name>`` names, mapped in place (no copy)."""
        if not self.shared:
            raise TensorFormatError("a shm: tensor argument, but shared memory was not agreed")
        segment_name, _, name = uri[len(_shm.SCHEME) :].partition("#")
        segments = self._segments
        if segments is None:
            segments = self._segments = {}
        tensors = segments.get(segment_name)
        if tensors is None:
            limit = _shm.HEADER_BYTES + 8 + self.limits.max_header_bytes + self.limits.max_bytes
            # kept mapped for the client's next call (its pooled segment): no fresh page faults
            segment = PEERS.attach(segment_name, size, max_bytes=limit)
            document = segment.document(nbytes)
            tensors = unpack(document, "torch" if kind == "torch" else "numpy", self.limits)
            del document
            segments[segment_name] = tensors
        value = tensors.get(name)
        if value is None:
            raise TensorFormatError(f"no tensor named {name!r} in segment {segment_name}")
        return _as_kind(value, kind)

    def get(self, name: str, kind: Kind) -> Any:
        if self._tensors is None:
            if self.view is None:
                raise TensorFormatError(
                    f"argument refers to cid:{name} but the request has no attachment"
                )
            self._tensors = unpack(self.view, "torch" if kind == "torch" else "numpy", self.limits)
        value = self._tensors.get(name)
        if value is None:
            raise TensorFormatError(f"no tensor named {name!r} in the request's attachment")
        return _as_kind(value, kind)


def _as_kind(value: Any, kind: Kind) -> Any:
    if kind_of(value) == kind:
        return value
    if kind == "numpy":
        try:
            return value.numpy()
        except TypeError:  # bfloat16
            raise TensorFormatError(f"a {value.dtype} tensor has no numpy form") from None
    from millimcp.tensor._imports import load_torch

    return load_torch().from_numpy(value)


class TensorParam:
    """A parameter typed as a tensor, a dict of tensors, or either ``| None``."""

    __slots__ = ("kind", "many", "optional", "schema", "wire_type")

    def __init__(self, kind: Kind, many: bool, optional: bool) -> None:
        self.kind: Kind = kind
        self.many = many
        self.optional = optional
        one = tensor_schema(kind)
        schema = {"type": "object", "additionalProperties": one} if many else one
        self.schema: dict[str, Any] = {"anyOf": [schema, {"type": "null"}]} if optional else schema
        wire: Any = dict[str, TensorValue] if many else TensorValue
        self.wire_type: Any = wire | None if optional else wire

    def decode(self, value: Any, attachment: RequestAttachment) -> Any:
        if value is None:
            return None
        if self.many:
            return {key: _decode_value(v, self.kind, attachment) for key, v in value.items()}
        return _decode_value(value, self.kind, attachment)


def _decode_value(value: TensorValue, kind: Kind, attachment: RequestAttachment) -> Any:
    if value.mime_type is not None and value.mime_type != MEDIA_TYPE:
        raise TensorFormatError(f"a tensor argument's mimeType is {MEDIA_TYPE}")
    if value.uri is not None and value.uri.startswith(_shm.SCHEME) and value.blob is None:
        return attachment.get_shared(value.uri, value.size, value.document_bytes, kind)
    if value.uri is not None:
        if value.blob is not None or not value.uri.startswith(CID):
            raise TensorFormatError("a tensor argument has either 'blob' or a 'uri' cid:<name>")
        return attachment.get(value.uri[len(CID) :], kind)
    if value.blob is None:
        raise TensorFormatError("a tensor argument needs 'blob' (base64) or 'uri' (cid:<name>)")
    tensors = unpack(value.blob, kind, attachment.limits)
    if len(tensors) != 1:
        raise TensorFormatError(f"a tensor argument holds one tensor, not {len(tensors)}")
    return next(iter(tensors.values()))


def tensor_param(annotation: Any) -> TensorParam | None:
    """How a parameter annotation takes tensors, or None when it does not."""
    optional = False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, _UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            return None
        optional, annotation = True, members[0]
        origin = typing.get_origin(annotation)
    kind = tensor_kind(annotation)
    if kind is not None:
        return TensorParam(kind, False, optional)
    if origin in (dict, Mapping):
        key, value = typing.get_args(annotation) or (None, None)
        kind = tensor_kind(value)
        if key is str and kind is not None:
            return TensorParam(kind, True, optional)
    return None


_UnionType: Final[Any] = type(int | None)


def tensor_return(annotation: Any) -> bool:
    """Whether a return annotation is a tensor or a dict of tensors."""
    param = tensor_param(annotation)
    return param is not None and not param.optional


def is_tensor_result(value: Any) -> bool:
    """A tensor, or a non-empty dict of tensors."""
    if is_tensor(value):
        return True
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(k, str) and is_tensor(v) for k, v in value.items())
    )


def _describe(name: str, entry_dtype: str, shape: tuple[int, ...]) -> dict[str, Any]:
    return {EXTENSION: {"name": name, "dtype": entry_dtype, "shape": list(shape)}}


def encode_result(
    value: Any, raw: bool, shared_with: SharedPeer | None = None
) -> tuple[list[ContentBlock], list[Any] | None]:
    """Content blocks for a tensor (or dict of tensors) result, and the attachment if ``raw``.

    ``shared_with`` (a verified same-host client): the tensors go in one of the segments it
    keeps for results when one is free and large enough, else in a new segment it will own
    and free; there is no attachment."""
    tensors: Mapping[str, Any] = value if isinstance(value, dict) else {RESULT_NAME: value}
    if raw and shared_with is not None:
        return _shared_result(tensors, shared_with), None
    if raw:
        packed = pack(tensors)
        entries = {e.name: e for e in packed.entries}
        links: list[ContentBlock] = [
            ResourceLink(
                uri=CID + e.name,
                name=e.name,
                mime_type=MEDIA_TYPE,
                size=e.end - e.begin,
                meta=_describe(e.name, e.dtype, e.shape),
            )
            for e in (entries[name] for name in tensors)  # in the tool's order
        ]
        return links, packed.parts
    blocks: list[ContentBlock] = []
    for name, tensor in tensors.items():
        packed = pack({name: tensor})
        entry = packed.entries[0]
        blob = base64.b64encode(packed.tobytes()).decode("ascii")
        blocks.append(
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri=f"tensor:{name}",
                    blob=blob,
                    mime_type=MEDIA_TYPE,
                ),
                meta=_describe(name, entry.dtype, entry.shape),
            )
        )
    return blocks, None


def _reply_segment(peer: SharedPeer, nbytes: int) -> Any:
    """One of the client's free result segments that fits ``nbytes``, marked filled (kept
    mapped: the client refills the same few)."""
    if nbytes > peer.reply_bytes:
        return None
    for name in peer.replies:  # the client's own (see shared_memory_peer)
        try:
            segment = PEERS.attach(
                name, _shm.HEADER_BYTES + peer.reply_bytes, max_bytes=_shm.HEADER_BYTES + (1 << 34)
            )
        except TensorFormatError:
            continue  # gone, or not what the offer said: a segment of its own instead
        if segment.view[0] == _shm.FREE:
            segment.view[0] = _shm.FILLED  # no await between the check and this: one writer
            return segment
    return None


def _shared_result(tensors: Mapping[str, Any], peer: SharedPeer) -> list[ContentBlock]:
    _shm.sweep_now_and_then()  # segments of clients that died before mapping theirs
    packed = pack(tensors)
    segment = _reply_segment(peer, packed.nbytes)
    made = segment is None
    if segment is None:
        segment = _shm.Segment.create(_shm.HEADER_BYTES + packed.nbytes, owner=peer.pid)
        segment.view[0] = _shm.FILLED
    try:
        _shm.fill(segment, packed.parts)
    except BaseException:
        if made:
            segment.unlink()
        raise
    finally:
        if made:
            segment.close()  # the client frees a new one once it has it mapped
    entries = {e.name: e for e in packed.entries}
    where = f"{_shm.SCHEME}{segment.name}#"
    return [
        ResourceLink(
            uri=where + e.name,
            name=e.name,
            mime_type=MEDIA_TYPE,
            size=e.end - e.begin,
            meta={
                EXTENSION: {
                    "name": e.name,
                    "dtype": e.dtype,
                    "shape": list(e.shape),
                    "segmentBytes": segment.size,
                    "documentBytes": packed.nbytes,
                }
            },
        )
        for e in (entries[name] for name in tensors)
    ]


def decode_result(
    result: Mapping[str, Any],
    attachment: Any = None,
    to: Kind = "numpy",
    limits: TensorLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """The tensors of a ``CallToolResult`` given as JSON values, by name (client side).

    Reads both forms: ``cid:`` links into ``attachment`` (a framed response's attachment)
    and embedded base64 safetensors blobs.
    """
    out: dict[str, Any] = {}
    shared: dict[str, Any] | None = None
    for block in result.get("content", ()):
        kind = block.get("type")
        if kind == "resource_link" and str(block.get("uri", "")).startswith(CID):
            if attachment is None:
                raise TensorFormatError("result links to cid: tensors but has no attachment")
            if shared is None:
                shared = unpack(attachment, to, limits)
            name = block["uri"][len(CID) :]
            if name not in shared:
                raise TensorFormatError(f"no tensor named {name!r} in the attachment")
            out[name] = shared[name]
        elif kind == "resource":
            resource = block.get("resource", {})
            if resource.get("mimeType") == MEDIA_TYPE and "blob" in resource:
                data = bytearray(base64.b64decode(resource["blob"], validate=True))
                out.update(unpack(data, to, limits))
    return out


def encode_arguments(
    arguments: Mapping[str, Any], raw: bool
) -> tuple[dict[str, Any], list[Any] | None]:
    """Arguments with tensors (and dicts of tensors) replaced by their JSON form (client side).

    ``raw``: tensors become ``cid:`` references into the returned attachment buffers;
    otherwise base64 blobs and no attachment.
    """
    out: dict[str, Any] = {}
    attached: dict[str, Any] = {}

    def one(name: str, tensor: Any) -> dict[str, Any]:
        if raw:
            attached[name] = tensor
            return {"uri": CID + name}
        blob = base64.b64encode(pack({name: tensor}).tobytes()).decode("ascii")
        return {"blob": blob, "mimeType": MEDIA_TYPE}

    for key, value in arguments.items():
        if is_tensor(value):
            out[key] = one(key, value)
        elif is_tensor_result(value):
            out[key] = {k: one(f"{key}.{k}", v) for k, v in value.items()}
        else:
            out[key] = value
    if raw and attached:
        return out, pack(attached).parts
    return out, None
