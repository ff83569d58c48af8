"""The results table: one row per experiment, the book's number beside ours, and where ours ran.

Pure data and text: no experiment runs here, nothing is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

__all__ = ["Row", "format_table", "HEADER"]

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


def format_table(rows: Sequence[Row] | Iterable[Row], *, width: int = 60) -> str:
    """Rows as a plain-text table (cells longer than ``width`` are wrapped onto more lines)."""
    rows = list(rows)
    if width < 10:
        raise ValueError(f"width must be at least 10, got {width}")
    cells = [HEADER] + [r.cells() for r in rows]
    wrapped = [[_wrap(c, width) for c in row] for row in cells]
    widths = [max(len(line) for row in wrapped for line in row[i]) for i in range(len(HEADER))]
    out = []
    for k, row in enumerate(wrapped):
        height = max(len(c) for c in row)
        for j in range(height):
            out.append("  ".join((c[j] if j < len(c) else "").ljust(w) for c, w in zip(row, widths)).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _wrap(text: str, width: int) -> list[str]:
    words, lines, line = str(text).split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    lines.append(line)
    return lines
