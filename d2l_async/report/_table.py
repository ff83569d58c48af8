"""The results table: one row per experiment, the book's number beside ours, and where ours ran.

Pure data and text: no experiment runs here, nothing is drawn.
"""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import dataclass
from typing import Iterable, Sequence

from .._args import having, integer, sequence

__all__ = ["Row", "format_table", "HEADER", "terminal_width", "wrap_line"]

#: Column titles of the printed table.
HEADER = ("experiment", "the book (MXNet, its machine)", "ours (measured now)", "device")


@dataclass(frozen=True)
class Row:
    """One line of the results table.

    Attributes:
        experiment: what was measured.
        book: the book's number with its unit, or ``"—"`` when the book prints none.
        ours: our measured number(s), as text.
        device: where ours ran (says "virtual" for the engine's threads).
    """

    experiment: str
    book: str
    ours: str
    device: str

    def cells(self) -> tuple[str, str, str, str]:
        return (self.experiment, self.book, self.ours, self.device)


def terminal_width(default: int = 100) -> int:
    """Columns of the terminal the report prints to (``$COLUMNS`` first, as ``shutil`` reads it)."""
    return shutil.get_terminal_size((default, 24)).columns


def format_table(rows: Sequence[Row] | Iterable[Row], *, width: int = 60, total: int | None = None) -> str:
    """Rows as a plain-text table whose lines fit in ``total`` characters.

    Args:
        rows: the table's rows (the header is added).
        width: no cell is wider than this; longer cells wrap onto more lines.
        total: the widest line; default the terminal's width (:func:`terminal_width`). Columns wider
            than their share are narrowed (the widest first), down to 8 characters each.
    """
    rows = [having("rows", r, ("cells",), what="a sequence of report Rows") for r in sequence("rows", rows, what="Rows")]
    width = integer("width", width, minimum=10)
    total = terminal_width() if total is None else integer("total", total, minimum=20)
    cells = [HEADER] + [r.cells() for r in rows]
    natural = [min(width, max(len(str(row[i])) for row in cells)) for i in range(len(HEADER))]
    widths = _fit(natural, total - 2 * (len(HEADER) - 1))
    wrapped = [[_wrap(c, w) for c, w in zip(row, widths)] for row in cells]
    widths = [max(len(line) for row in wrapped for line in row[i]) for i in range(len(HEADER))]
    out = []
    for k, row in enumerate(wrapped):
        height = max(len(c) for c in row)
        for j in range(height):
            out.append("  ".join((c[j] if j < len(c) else "").ljust(w) for c, w in zip(row, widths)).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def wrap_line(text: str, *, total: int | None = None, indent: str = "  ", hang: str = "      ") -> str:
    """One long line (a lesson check) wrapped to ``total`` characters, continuation lines indented."""
    total = terminal_width() if total is None else integer("total", total, minimum=1)
    return textwrap.fill(str(text), width=max(total, 20), initial_indent=indent, subsequent_indent=hang,
                         break_long_words=True, break_on_hyphens=False)


def _fit(natural: list[int], room: int, floor: int = 8) -> list[int]:
    widths = list(natural)
    while sum(widths) > room:
        i = max(range(len(widths)), key=widths.__getitem__)
        if widths[i] <= floor:
            break  # the terminal is too narrow for every column: the lines overflow rather than vanish
        widths[i] -= 1
    return widths


def _wrap(text: str, width: int) -> list[str]:
    lines = textwrap.wrap(str(text), width=width, break_long_words=True, break_on_hyphens=False)
    return lines or [""]
