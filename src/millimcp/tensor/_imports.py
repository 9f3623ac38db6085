"""Lazy imports of numpy and torch, and type checks that never import them.

numpy and torch are optional (``pip install 'millimcp[torch]'``). Nothing in millimcp imports
them at import time: a value is recognised as an array or a tensor by its type's module name,
and the library is imported on first real use.
"""

from __future__ import annotations

import sys
import typing
from types import ModuleType
from typing import Any, Literal

__all__ = ["Kind", "is_tensor", "kind_of", "load_numpy", "load_torch", "tensor_kind"]

Kind = Literal["numpy", "torch"]


def load_numpy() -> ModuleType:
    try:
        import numpy
    except ImportError:
        raise ImportError(
            "tensors need numpy: pip install 'millimcp[torch]' (or numpy alone)"
        ) from None
    return numpy


def load_torch() -> ModuleType:
    try:
        import torch
    except ImportError:
        raise ImportError("torch tensors need torch: pip install 'millimcp[torch]'") from None
    return torch


def kind_of(value: Any) -> Kind | None:
    """``"numpy"`` for an ndarray, ``"torch"`` for a torch.Tensor, else None (no import)."""
    cls = type(value)
    module = cls.__module__
    if module == "numpy" and cls.__name__ == "ndarray":
        return "numpy"
    if module.startswith("torch") and "torch" in sys.modules:
        torch = sys.modules["torch"]
        if isinstance(value, torch.Tensor):
            return "torch"
    return None


def is_tensor(value: Any) -> bool:
    return kind_of(value) is not None


def tensor_kind(annotation: Any) -> Kind | None:
    """The library of a tensor type hint: ``np.ndarray``, ``npt.NDArray[...]``, ``torch.Tensor``.

    Also accepts ``Annotated[...]`` around them. Never imports numpy or torch.
    """
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return tensor_kind(typing.get_args(annotation)[0])
    target = origin if origin is not None else annotation
    if not isinstance(target, type):
        return None
    module, name = target.__module__, target.__qualname__
    if module == "numpy" and name == "ndarray":
        return "numpy"
    if module == "torch" and name == "Tensor":
        return "torch"
    return None
