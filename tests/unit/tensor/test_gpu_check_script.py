"""``benchmarks/gpu_check.sh`` still matches the scripts it runs.

No GPU has been lent yet, and a lent one is used for a few minutes: the prepared check must
run the first time. Here every ``"$PY" script.py --flag ...`` line of it is read, and each
flag (and each flag it hands the model server through ``--extra=``) must be one that the
script's own ``--help`` lists; every test file it names must exist.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys

import pytest

from tests.conftest import PYTHON_ENV, ROOT

SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
_RUN = re.compile(r'"\$PY" ((?:benchmarks|examples)/\S+\.py)(.*)')
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)(?:=(\S+))?")
_SERVER = "examples/model_server.py"


def _commands() -> list[tuple[str, str]]:
    """(script, its arguments) for each Python script the check runs, lines joined."""
    text = SCRIPT.read_text(encoding="utf-8").replace("\\\n", " ")
    return [(match.group(1), match.group(2)) for match in _RUN.finditer(text)]


def _flags(arguments: str) -> dict[str, list[str]]:
    """The flags per script: the command's own, and those ``--extra=`` passes on."""
    own: list[str] = []
    passed: list[str] = []
    for flag, value in _FLAG.findall(arguments):
        own.append(flag)
        if flag == "--extra" and value:
            passed.append(value.split("=", 1)[0])
    return {"own": own, "passed": passed}


@functools.cache
def _help(script: str) -> str:
    done = subprocess.run(
        [sys.executable, script, "--help"],
        cwd=ROOT,
        env=PYTHON_ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_the_check_runs_the_scripts_it_names() -> None:
    scripts = {script for script, _ in _commands()}
    assert {"benchmarks/model_serving.py", "benchmarks/shared_memory.py", _SERVER} <= scripts
    for script in scripts:
        assert (ROOT / script).is_file(), script


@pytest.mark.parametrize("script", sorted({script for script, _ in _commands()}))
def test_every_flag_it_passes_is_one_the_script_takes(script: str) -> None:
    usage = _help(script)
    server_usage = _help(_SERVER)
    for named, arguments in _commands():
        if named != script:
            continue
        flags = _flags(arguments)
        for flag in flags["own"]:
            assert re.search(rf"{flag}\b", usage), f"{script} takes no {flag}"
        for flag in flags["passed"]:
            assert re.search(rf"{flag}\b", server_usage), f"{_SERVER} takes no {flag}"


def test_the_tests_it_runs_exist() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    named = re.findall(r"tests/\S+\.py", text)
    assert named
    for path in named:
        assert (ROOT / path).is_file(), path
