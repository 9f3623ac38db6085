"""Every input kept in ``corpus/<target>/`` (seeds, and crashes once fixed) still passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

CORPUS = Path(__file__).resolve().parent / "corpus"
CASES = sorted((target, path) for target in TARGETS for path in sorted((CORPUS / target).glob("*")))


@pytest.mark.parametrize(("target", "path"), CASES, ids=[f"{t}/{p.name}" for t, p in CASES])
def test_corpus_input_passes(target: str, path: Path) -> None:
    TARGETS[target](path.read_bytes())


def test_every_target_has_a_corpus() -> None:
    assert {target for target, _ in CASES} == set(TARGETS)
