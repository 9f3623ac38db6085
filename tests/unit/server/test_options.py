"""millimcp.server.options: ToolOptions is a frozen value that checks itself."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from millimcp import ConfigurationError
from millimcp.server.options import ToolOptions


def test_defaults_and_frozen() -> None:
    options = ToolOptions()
    assert options.name is None
    assert options.executor == "thread"
    assert options.text_mirror is True
    assert options.invalidates == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.name = "x"  # type: ignore[misc]
    assert dataclasses.replace(options, timeout=2.0).timeout == 2.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"executor": "fiber"}, "executor must be"),
        ({"timeout": 0}, "timeout must be positive"),
        ({"timeout": -1.0}, "timeout must be positive"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ToolOptions(**options)
