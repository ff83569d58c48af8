"""One look for every figure: a colour-blind-safe palette, fonts, lane order and labels, units.

The palette is Okabe & Ito's eight colours ("Color Universal Design", 2008), which stay distinct
under the common forms of colour blindness.  Every figure takes its colours from here, so an op is
the same blue in the timeline, the dependency graph and the dashboard, and a blocked frontend is
always vermillion.

Times are stored in seconds; figures show them in the unit that suits the span
(:func:`time_unit`) and always say the unit in the axis title.
"""

from __future__ import annotations

import re
from typing import Any

from .._args import having, integer, number

__all__ = [
    "OKABE_ITO", "KIND_COLORS", "STATE_COLORS", "FONT", "time_unit", "time_axis_title",
    "KIND_ORDER", "lane_label", "kind_color", "block_label", "block_statement", "series_color", "base_layout",
    "bytes_unit",
]

#: Okabe–Ito palette, by name.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "grey": "#999999",
}

#: Colour of each event kind (see :class:`d2l_async.trace.Kind`).
KIND_COLORS: dict[str, str] = {
    "op": OKABE_ITO["blue"],
    "kernel": OKABE_ITO["bluish_green"],
    "copy": OKABE_ITO["orange"],
    "memset": OKABE_ITO["yellow"],  # not reddish purple: that is the backward pass (one colour per role)
    "launch": OKABE_ITO["sky_blue"],
    "runtime": OKABE_ITO["grey"],
    "block": OKABE_ITO["vermillion"],
}

#: Drawing order of kinds (later ones on top): launches sit on the frontend ops that contain them.
KIND_ORDER: tuple[str, ...] = ("op", "kernel", "copy", "memset", "runtime", "launch")

#: Colour of each node state in the dependency-graph animation.
STATE_COLORS: dict[str, str] = {
    "not issued": "#F2F2F2",
    "queued": OKABE_ITO["orange"],
    "ready": OKABE_ITO["yellow"],
    "running": OKABE_ITO["blue"],
    "done": OKABE_ITO["bluish_green"],
    "pending": "#FFFFFF",
}

#: Series colours for lanes/labels in line plots, in order (black is kept for the frontend).
_SERIES = ["blue", "orange", "bluish_green", "reddish_purple", "sky_blue", "vermillion", "yellow", "grey"]

FONT: dict[str, Any] = {"family": "Open Sans, Helvetica, Arial, sans-serif", "size": 13, "color": "#222222"}
MONO = "Menlo, DejaVu Sans Mono, monospace"


def series_color(i: int) -> str:
    """The ``i``-th series colour (cycles through the palette)."""
    return OKABE_ITO[_SERIES[integer("i", i) % len(_SERIES)]]


def kind_color(kind: str) -> str:
    """Colour of an event kind; grey for kinds this module does not know."""
    return KIND_COLORS.get(str(kind), OKABE_ITO["grey"])


def time_unit(span_seconds: float) -> tuple[str, float]:
    """The unit that suits a time span: ``("µs", 1e6)``, ``("ms", 1e3)`` or ``("s", 1.0)``.

    The factor multiplies seconds into the unit.
    """
    span_seconds = number("span_seconds", span_seconds, finite=False)
    span = abs(span_seconds) if span_seconds == span_seconds else 0.0
    if span < 1e-3:
        return "µs", 1e6
    if span < 1.0:
        return "ms", 1e3
    return "s", 1.0


def time_axis_title(unit: str) -> str:
    return f"time since the first event ({unit})"


def bytes_unit(max_bytes: float) -> tuple[str, float]:
    """``(unit, divisor)`` for a byte count: B, KiB, MiB or GiB."""
    max_bytes = number("max_bytes", max_bytes, finite=False)
    for unit, div in (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if max_bytes >= div:
            return unit, div
    return "B", 1.0


def lane_label(lane: Any) -> str:
    """How a lane is named on an axis: virtual devices say so (a thread is not hardware)."""
    name = having("lane", lane, ("name",), what="a d2l_async.trace.Lane").name
    if getattr(lane, "virtual", False) and "virtual" not in name:
        return f"{name} (virtual)"
    return name


_LINE = re.compile(r"(?:^|[\s,])line\s+(\d+)\s*:\s*(.*)$")  # "cell 3, line 12: print(z)"
_FILE_LINE = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+)(?::\s*(?P<code>.*))?$")  # "train.py:12: print(z)"


_COMMENT = re.compile(r"\s+#[^'\"]*$")  # a trailing comment (not a '#' inside a string)
_MAX_LABEL = 48


def _clip(text: str, n: int = _MAX_LABEL) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _last_statement(code: str) -> str:
    """The statement of a line that blocked: the last one (``b = a @ a; print(b.sum())`` blocks in
    ``print``, after the product was queued)."""
    parts = [p.strip() for p in code.split(";")]
    return parts[-1] if parts[-1] else code.strip()


def _block_parts(reason: str, source: str) -> tuple[str, str, str]:
    """(reason prefix, the blocking statement, where) of a frontend wait."""
    reason, source = str(reason or "").strip(), str(source or "").strip()
    if not source:
        return "", reason or "blocked", ""
    match = _LINE.search(source)
    file_match = _FILE_LINE.match(source)
    if match:
        code, where = _last_statement(_COMMENT.sub("", match.group(2))), f"line {match.group(1)}"
    elif file_match:
        code, line = _last_statement(_COMMENT.sub("", file_match.group("code") or "")), file_match.group("line")
        where = f"{file_match.group('file')} line {line}" if file_match.group("file").startswith("In[") else f"line {line}"
        if not code:
            code, where = "", f"{file_match.group('file')}, line {line}"
    else:
        code, where = source, ""
    head = f"{reason}: " if reason and reason not in code else ""
    return head, code, where


def block_label(reason: str, source: str) -> str:
    """The cause of a frontend wait, e.g. ``"print(z) — line 12"`` or ``"waitall"``.

    ``source`` is the trace's source column (``"cell 3, line 12: print(z)"``); ``reason`` says why
    the frontend waited (``"print"``, ``"waitall"``, ``"full queue"``).
    """
    head, code, where = _block_parts(reason, source)
    if not head and not where:
        return _clip(code)
    tail = f" — {where}" if code and where else where
    # cut the code, never the line that names it (a label "— In[12] line …" names nothing)
    return head + _clip(code, max(_MAX_LABEL - len(head) - len(tail), 12)) + tail


def block_statement(reason: str, source: str) -> str:
    """The statement a frontend wait happened in, whole: ``"print(b.sum())"`` (or the reason when the
    source names no statement) — the short name of a wait where its label does not fit."""
    _, code, _ = _block_parts(reason, source)
    return code or str(reason or "").strip() or "blocked"


def base_layout(**overrides: Any) -> dict[str, Any]:
    """Layout settings shared by every figure (white background, palette font, compact margins)."""
    layout: dict[str, Any] = {
        "template": "plotly_white",
        "font": dict(FONT),
        "margin": {"l": 10, "r": 20, "t": 60, "b": 50},
        "hoverlabel": {"font": {"family": MONO, "size": 12}},
        "legend": {"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.01,
                   "font": {"size": 12}},
    }
    layout.update(overrides)
    return layout
