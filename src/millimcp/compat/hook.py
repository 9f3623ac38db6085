"""The import hook: ``mcp.server.fastmcp``, ``mcp.server.mcpserver`` and ``fastmcp`` (and
every submodule of theirs) become millimcp's shims, so an installed server runs unmodified.

``install()`` puts a finder first on ``sys.meta_path``. Each aliased name gets its own
module object holding the shim's public names (``from mcp.server.fastmcp.prompts import
base; base.UserMessage`` works; so does ``from fastmcp.exceptions import ToolError``).
``mcp.types`` and the rest of ``mcp`` stay the real SDK when it is installed; without it,
``mcp`` and ``mcp.server`` are empty packages and ``mcp.types`` is ``mcp_types`` when that is
installed.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence
from typing import Final

__all__ = ["ALIASES", "install", "uninstall"]

ALIASES: Final = {
    "mcp.server.fastmcp": "millimcp.compat.mcp1",
    "mcp.server.mcpserver": "millimcp.compat.mcp2",
    "fastmcp": "millimcp.compat.fastmcp",
}
"""Aliased package -> the shim whose names it (and each of its submodules) gets."""
_PARENTS: Final = ("mcp", "mcp.server")


def _shim_for(fullname: str) -> str | None:
    for prefix, shim in ALIASES.items():
        if fullname == prefix or fullname.startswith(prefix + "."):
            return shim
    return None


def _real_spec(fullname: str, path: Sequence[str] | None) -> importlib.machinery.ModuleSpec | None:
    for finder in sys.meta_path:
        if isinstance(finder, _Finder):
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(fullname, path)
        if spec is not None:
            return spec  # type: ignore[no-any-return]
    return None


class _Loader(importlib.abc.Loader):
    def __init__(self, shim: str | None, alias_of: str | None = None) -> None:
        self.shim = shim
        self.alias_of = alias_of

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        if self.alias_of is not None:
            return importlib.import_module(self.alias_of)
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if self.alias_of is not None:
            return
        if self.shim is None:  # an empty parent package (mcp, mcp.server without the SDK)
            module.__path__ = []
            return
        shim = importlib.import_module(self.shim)
        module.__path__ = []  # a package: its submodules are aliased too
        for name in getattr(shim, "__all__", ()):
            setattr(module, name, getattr(shim, name))
        module.__millimcp_shim__ = self.shim  # type: ignore[attr-defined]


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        shim = _shim_for(fullname)
        if shim is not None:
            return importlib.util.spec_from_loader(fullname, _Loader(shim), is_package=True)
        if fullname in _PARENTS and _real_spec(fullname, path) is None:
            return importlib.util.spec_from_loader(fullname, _Loader(None), is_package=True)
        if fullname == "mcp.types" and not _has_real_mcp():
            return importlib.util.spec_from_loader(fullname, _Loader(None, alias_of="mcp_types"))
        return None


def _has_real_mcp() -> bool:
    module = sys.modules.get("mcp")
    return module is not None and getattr(module, "__file__", None) is not None


_FINDER: Final = _Finder()


def install() -> None:
    """Alias the three APIs to the shims for every later import (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    for name in list(sys.modules):  # the real frameworks, if something imported them already
        if _shim_for(name) is not None and not hasattr(sys.modules[name], "__millimcp_shim__"):
            del sys.modules[name]


def uninstall() -> None:
    """Remove the hook and the aliased modules."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in list(sys.modules):
        if hasattr(sys.modules[name], "__millimcp_shim__"):
            del sys.modules[name]
