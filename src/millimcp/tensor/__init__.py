"""Tensors over MCP: the wire format, the ``dev.millimcp/tensor`` extension, model hosting.

The only room that imports numpy and torch, and only when a tensor is actually used:
importing this package imports neither. Install them with ``pip install 'millimcp[torch]'``.
"""

from millimcp.codec.attachment import ATTACHMENT_MEDIA_TYPE
from millimcp.tensor.batching import Batching, DynamicBatcher
from millimcp.tensor.extension import (
    EXTENSION,
    decode_result,
    encode_arguments,
    encode_result,
)
from millimcp.tensor.hosting import Model, resolve_device
from millimcp.tensor.wire import DTYPES, MEDIA_TYPE, Packed, TensorLimits, pack, unpack

__all__ = [
    "ATTACHMENT_MEDIA_TYPE",
    "DTYPES",
    "EXTENSION",
    "MEDIA_TYPE",
    "Batching",
    "DynamicBatcher",
    "Model",
    "Packed",
    "TensorLimits",
    "decode_result",
    "encode_arguments",
    "encode_result",
    "pack",
    "resolve_device",
    "unpack",
]
