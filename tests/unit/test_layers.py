"""The architecture's import rules (docs: /ARCHITECTURE.md, "Rooms (import only downward)").

Layers, top to bottom: lab > server | client > cache | tensor | tasks > session > transports >
resilience | observe > protocol > codec > errors. A module imports only from its own room or
from rooms below it; rooms on the same layer do not import each other. The top-level modules
(``__init__``, ``__main__``, ``cli``, ``_worker``) are the application and may import anything.
Only tensor/ imports torch or numpy, and importing ``millimcp.protocol`` pulls in no asyncio,
HTTP or torch module.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import millimcp

SRC = Path(millimcp.__file__).resolve().parent

RANKS: dict[str, int] = {
    "errors": 0,
    "codec": 1,
    "protocol": 2,
    "observe": 3,
    "resilience": 3,
    "auth": 3,
    "transports": 4,
    "session": 5,
    "cache": 6,
    "tensor": 6,
    "tasks": 6,
    "server": 7,
    "client": 7,
    "lab": 8,
    "compat": 8,
    "testing": 9,
}
"""Rooms by layer; a room may import rooms of a strictly lower rank, and itself."""

APP_MODULES = frozenset({"__init__", "__main__", "cli", "_worker"})
"""Top-level modules at the application level: they may import anything."""

ONLY_IN_TENSOR = ("torch", "numpy")

FORBIDDEN_FOR_PROTOCOL = (
    "asyncio",
    "http",
    "httptools",
    "uvicorn",
    "starlette",
    "aiohttp",
    "torch",
    "numpy",
)


def room_of(module: str, package: str = "millimcp") -> str | None:
    """The room of a dotted module name inside ``package``; None for the app level."""
    parts = module.split(".")
    if parts[0] != package:
        raise ValueError(f"{module} is not in {package}")
    if len(parts) == 1:
        return None  # the package itself: its __init__ is app level
    top = parts[1]
    return None if top in APP_MODULES else top


def module_name(path: Path, root: Path, package: str) -> str:
    relative = path.relative_to(root).with_suffix("")
    parts = [package, *relative.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_from(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def is_module(name: str, root: Path, package: str) -> bool:
    parts = name.split(".")[1:]
    if not parts:
        return True
    target = root.joinpath(*parts)
    return target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()


def imports_of(path: Path, module: str, root: Path, package: str) -> list[tuple[int, str]]:
    """Every module ``path`` imports (anywhere in the file), as (line, dotted name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = resolve_from(module, is_package, node.level, node.module)
            else:
                base = node.module or ""
            for alias in node.names:
                # ``from millimcp import errors`` imports the submodule millimcp.errors.
                candidate = f"{base}.{alias.name}"
                inside = candidate.split(".")[0] == package
                name = candidate if inside and is_module(candidate, root, package) else base
                if (node.lineno, name) not in found:
                    found.append((node.lineno, name))
    return found


def layer_violations(root: Path, package: str = "millimcp") -> list[str]:
    """Every import in the package at ``root`` that breaks the rules, as readable lines."""
    problems: list[str] = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root, package)
        own = room_of(module, package)
        if own is not None and own not in RANKS:
            problems.append(f"{path.relative_to(root)}: room {own!r} is not in the layer map")
            continue
        for line, imported in imports_of(path, module, root, package):
            where = f"{path.relative_to(root)}:{line}"
            top = imported.split(".")[0]
            if top in ONLY_IN_TENSOR and own != "tensor":
                problems.append(f"{where}: {module} imports {imported} (only tensor/ may)")
            if top != package or not is_module(imported, root, package):
                continue
            target = room_of(imported, package)
            if own is None or target == own:
                continue
            if target is None:
                problems.append(
                    f"{where}: {module} (room {own}) imports the app-level module {imported}"
                )
            elif target not in RANKS:
                problems.append(f"{where}: {module} imports {imported}, an unmapped room")
            elif RANKS[target] >= RANKS[own]:
                problems.append(
                    f"{where}: {module} (room {own}, layer {RANKS[own]}) imports {imported} "
                    f"(room {target}, layer {RANKS[target]})"
                )
    return problems


# -- the rule checker itself can fail -------------------------------------------------------------


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_the_checker_reports_upward_sideways_and_app_level_imports(tmp_path: Path) -> None:
    root = tmp_path / "millimcp"
    write(root, "__init__.py", "from millimcp.server import x\n")
    write(root, "cli.py", "import millimcp.server\n")
    write(root, "errors.py", "")
    write(root, "codec/__init__.py", "from millimcp.errors import E\nfrom . import json\n")
    write(root, "codec/json.py", "from ..protocol import jsonrpc\n")  # upward, relative
    write(root, "protocol/__init__.py", "")
    write(root, "protocol/jsonrpc.py", "def f():\n    import millimcp.session.context\n")
    write(root, "session/__init__.py", "")
    write(root, "session/context.py", "from millimcp import cli\n")  # app level
    write(root, "server/__init__.py", "from millimcp.client import c\n")  # sideways
    write(root, "client/__init__.py", "c = 1\n")
    write(root, "tensor/__init__.py", "import torch\n")  # allowed
    write(root, "cache/__init__.py", "import numpy as np\n")  # not allowed
    problems = layer_violations(root)
    text = "\n".join(problems)
    expected = (
        "codec/json.py:1: millimcp.codec.json (room codec, layer 1) imports millimcp.protocol"
    )
    assert expected in text
    assert "protocol/jsonrpc.py:2" in text
    assert "session/context.py:1" in text
    assert "app-level module millimcp.cli" in text
    assert "server/__init__.py:1" in text
    assert "(room client, layer 7)" in text
    assert "cache/__init__.py:1: millimcp.cache imports numpy (only tensor/ may)" in text
    assert not any(
        p.startswith(("__init__.py", "cli.py", "tensor/", "codec/__init__")) for p in problems
    )
    assert len(problems) == 5, problems


def test_the_checker_reports_an_unmapped_room(tmp_path: Path) -> None:
    root = tmp_path / "millimcp"
    write(root, "__init__.py", "")
    write(root, "mystery/__init__.py", "")
    assert layer_violations(root) == ["mystery/__init__.py: room 'mystery' is not in the layer map"]


# -- the real package -----------------------------------------------------------------------------


def test_every_module_imports_only_downward() -> None:
    problems = layer_violations(SRC)
    assert not problems, "imports that break the layer order:\n" + "\n".join(problems)


def test_the_real_package_has_rooms_to_check() -> None:
    rooms = {room_of(module_name(p, SRC, "millimcp")) for p in SRC.rglob("*.py")}
    assert {"errors", "codec", "protocol", "session", "transports", "server"} <= rooms
    # The checker sees real cross-room imports (so an empty violation list means something).
    seen = {
        (room_of(module_name(p, SRC, "millimcp")), room_of(name))
        for p in SRC.rglob("*.py")
        for _, name in imports_of(p, module_name(p, SRC, "millimcp"), SRC, "millimcp")
        if name.split(".")[0] == "millimcp" and is_module(name, SRC, "millimcp")
    }
    assert ("session", "transports") in seen
    assert ("server", "session") in seen
    assert ("protocol", "codec") in seen


# -- importing millimcp.protocol ------------------------------------------------------------------

REPORT = """
import json, sys
{setup}
import millimcp.protocol
forbidden = {forbidden!r}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in forbidden)
mine = sorted(m for m in sys.modules if m.startswith("millimcp"))
print(json.dumps({{"loaded": loaded, "millimcp": mine}}))
"""

BYPASS_PACKAGE_INIT = """
import importlib.util, types
spec = importlib.util.find_spec("millimcp")
package = types.ModuleType("millimcp")
package.__path__ = list(spec.submodule_search_locations)
sys.modules["millimcp"] = package
"""


def import_report(setup: str = "") -> dict[str, list[str]]:
    code = REPORT.format(setup=setup, forbidden=FORBIDDEN_FOR_PROTOCOL)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    report: dict[str, list[str]] = json.loads(result.stdout)
    return report


def test_importing_millimcp_protocol_loads_no_asyncio_http_or_torch() -> None:
    report = import_report()
    assert report["loaded"] == [], (
        f"import millimcp.protocol loaded {report['loaded']}; "
        f"millimcp modules loaded: {report['millimcp']}"
    )


def test_the_protocol_room_itself_loads_no_asyncio_http_or_torch() -> None:
    """The same check with the package ``__init__`` bypassed: the room on its own is clean."""
    report = import_report(BYPASS_PACKAGE_INIT)
    assert report["loaded"] == []
    rooms = {m.split(".")[1] for m in report["millimcp"] if m.count(".") >= 1}
    assert rooms <= {"errors", "codec", "protocol"}, report["millimcp"]
    assert "millimcp.protocol.jsonrpc" in report["millimcp"]


def test_msgspec_itself_loads_nothing_forbidden() -> None:
    code = (
        "import json, sys, msgspec, msgspec.json\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{FORBIDDEN_FOR_PROTOCOL!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(result.stdout) == []
