"""Tables for the lab's terminal output: rich on a terminal, plain aligned text elsewhere.

Plain text (a pipe, a file, CI logs) has no colours and no box characters, so it diffs and
greps well. ``rich`` is imported only when stdout is a terminal (plain text when it is not
installed: a table is never worth losing a measurement over).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Literal

__all__ = ["Table", "duration", "percent"]


def duration(ms: float) -> str:
    """A duration in the unit that keeps three significant digits: µs, ms or s."""
    if ms != ms:  # NaN
        return "-"
    if abs(ms) < 1.0:
        return f"{ms * 1000:.1f} µs"
    if abs(ms) < 1000.0:
        return f"{ms:.3g} ms" if abs(ms) < 100 else f"{ms:.1f} ms"
    return f"{ms / 1000:.3g} s"


def percent(value: float, *, sign: bool = False) -> str:
    return f"{value:+.1f}%" if sign else f"{value:.1f}%"


@dataclass
class Table:
    """Columns, rows and notes; :meth:`print` picks rich or plain text."""

    columns: Sequence[tuple[str, Literal["left", "right"]]]
    title: str | None = None
    rows: list[tuple[list[str], str | None]] = field(default_factory=list)
    """Cells and a style (``"bold"``, ``"red"``, ``"dim"``... or None)."""
    separators: set[int] = field(default_factory=set)
    """Row indexes preceded by a rule."""

    def add(self, cells: Sequence[str], style: str | None = None, *, rule: bool = False) -> None:
        if rule:
            self.separators.add(len(self.rows))
        self.rows.append((list(cells), style))

    def print(self, stream: IO[str] | None = None) -> None:
        out = stream or sys.stdout
        if out.isatty():
            try:
                self._rich(out)
                return
            except ImportError:
                pass
        out.write(self.plain())

    def plain(self) -> str:
        widths = [len(name) for name, _ in self.columns]
        for cells, _ in self.rows:
            for i, cell in enumerate(cells):
                widths[i] = max(widths[i], len(cell))
        lines = []
        if self.title:
            lines.append(self.title)
        lines.append(self._line([name for name, _ in self.columns], widths))
        lines.append("  ".join("-" * w for w in widths))
        for i, (cells, _) in enumerate(self.rows):
            if i in self.separators:
                lines.append("  ".join("-" * w for w in widths))
            lines.append(self._line(cells, widths))
        return "\n".join(lines) + "\n"

    def _line(self, cells: Sequence[str], widths: Sequence[int]) -> str:
        parts = []
        for cell, width, (_, align) in zip(cells, widths, self.columns, strict=False):
            parts.append(cell.ljust(width) if align == "left" else cell.rjust(width))
        return "  ".join(parts).rstrip()

    def _rich(self, out: IO[str]) -> None:
        from rich.console import Console
        from rich.table import Table as RichTable

        table = RichTable(title=self.title, title_justify="left")
        for name, align in self.columns:
            table.add_column(name, justify=align)
        for i, (cells, style) in enumerate(self.rows):
            table.add_row(*cells, style=style, end_section=i + 1 in self.separators)
        Console(file=out).print(table)
