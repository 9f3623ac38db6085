"""The shape of the package: no import circle (type-only imports count), no module over 600 lines.

Every ``import`` and ``from ... import`` of every module is read with ``ast``, those under
``if TYPE_CHECKING:`` and inside functions included: an import that only a type checker or a
lazy path follows is still a dependency a reader has to hold in their head. A package's
``__init__`` is a module like any other (a submodule that imports its own package's
``__init__`` depends on everything the ``__init__`` imports).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import millimcp

SRC = Path(millimcp.__file__).resolve().parent
MAX_LINES = 600


def module_names(root: Path, package: str) -> dict[str, Path]:
    names: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(path: Path, module: str, known: Mapping[str, Path]) -> set[str]:
    """The modules of ``known`` that ``path`` imports, anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    known = module_names(root, package)
    return {name: imports_of(path, name, known) for name, path in known.items()}


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_circle_through_type_only_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n"
    )
    (package / "c.py").write_text("def late():\n    from . import d\n")
    (package / "d.py").write_text("from .c import late\n")
    (package / "e.py").write_text("import pkg.a\n")
    found = circles(import_graph(package, "pkg"))
    assert found == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]


def test_no_import_circle_in_the_package() -> None:
    assert circles(import_graph(SRC, "millimcp")) == []


def test_no_module_over_600_lines() -> None:
    long = {
        str(path.relative_to(SRC)): count
        for path in SRC.rglob("*.py")
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
