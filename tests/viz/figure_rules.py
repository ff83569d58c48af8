"""Rules a notebook figure must pass to be read at a glance, as a static 900 px PNG (issue 20).

Each rule is a pure function of a figure's JSON (``fig.to_plotly_json()`` or a notebook output's
``application/vnd.plotly.v1+json``) and returns a list of problems (empty: the rule holds):

* :func:`title_overflow` — every line of the title and subtitle fits the width;
* :func:`overlapping_labels` — no two text labels overlap (annotations, scatter text, bar text),
  estimated from their positions, font sizes and lengths;
* :func:`missing_legend` — a timeline whose bars have more than one role has a legend.

The estimates are deliberately independent of the package's own wrapping code: an average
character advance of 0.58 em (a little wider than the package assumes), so a title the package
wraps just to the edge still passes, and one it never wrapped does not.
"""

from __future__ import annotations

import html
import re
from typing import Any

WIDTH = 900
CHAR_EM = 0.58
_TAG = re.compile(r"<[^>]+>")


def _px(text: str, size: float) -> float:
    return len(html.unescape(_TAG.sub("", str(text)))) * size * CHAR_EM


def _get(d: Any, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def title_overflow(fig: dict[str, Any], width: int = WIDTH) -> list[str]:
    layout = fig.get("layout", {})
    base = float(_get(layout, "font", "size", default=12) or 12)
    title = _get(layout, "title", default={}) or {}
    if isinstance(title, str):
        title = {"text": title}
    size = float(_get(title, "font", "size", default=base * 1.4) or base * 1.4)
    problems = []
    room = float(layout.get("width") or width) - 20
    for text, sz in ((title.get("text") or "", size), (_get(title, "subtitle", "text", default="") or "", base)):
        for line in re.split(r"<br\s*/?>", text):
            s = sz * 0.7 if "<sup>" in line else sz
            if _px(line, s) > room:
                problems.append(f"title line of ~{_px(line, s):.0f} px > {room:.0f} px: {_TAG.sub('', line)[:80]!r}")
    return problems


def _axis_maps(fig: dict[str, Any], width: int) -> dict[str, Any]:
    """Per axis name ('x', 'x2', 'y', ...): a function data -> pixel, from the axis range or the data."""
    layout = fig.get("layout", {})
    height = float(layout.get("height") or 450)
    margin = layout.get("margin") or {}
    plot_w = float(layout.get("width") or width) - float(margin.get("l", 80)) - float(margin.get("r", 80)) - 150
    plot_h = height - float(margin.get("t", 100)) - float(margin.get("b", 80))
    values: dict[str, list[float]] = {}
    for tr in fig.get("data", []):
        for ax in ("x", "y"):
            name = tr.get(f"{ax}axis", ax) or ax
            vals = tr.get(ax)
            if isinstance(vals, (list, tuple)):
                nums = [float(v) for v in vals if isinstance(v, (int, float)) and v == v]
                if tr.get("type") == "bar" and ax == "x" and tr.get("base") is not None:
                    base = tr.get("base")
                    base = base if isinstance(base, (list, tuple)) else [base] * len(nums)
                    nums += [float(b) + float(v) for b, v in zip(base, vals) if isinstance(v, (int, float))]
                    nums += [float(b) for b in base if isinstance(b, (int, float))]
                values.setdefault(name, []).extend(nums)
    maps = {}
    for name, nums in values.items():
        key = ("xaxis" if name.startswith("x") else "yaxis") + name[1:]
        rng = _get(layout, key, "range")
        lo, hi = (min(rng), max(rng)) if isinstance(rng, (list, tuple)) and len(rng) == 2 else (
            (min(nums), max(nums)) if nums else (0.0, 1.0))
        span = (hi - lo) or 1.0
        scale = (plot_w if name.startswith("x") else plot_h) / span
        maps[name] = (lo, scale)
    return maps


def _boxes(fig: dict[str, Any], width: int) -> list[tuple[str, float, float, float, float]]:
    """(text, x0, x1, y0, y1) in pixels for every text label placed in data coordinates."""
    maps = _axis_maps(fig, width)
    layout = fig.get("layout", {})
    base = float(_get(layout, "font", "size", default=12) or 12)
    out = []

    def place(text: str, x: Any, y: Any, xa: str, ya: str, size: float, anchor: str = "center",
              vertical: str = "middle") -> None:
        if not text or not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
            return
        if xa not in maps or ya not in maps:
            return
        (xlo, xs), (ylo, ys) = maps[xa], maps[ya]
        px, py = (x - xlo) * xs, (y - ylo) * ys
        lines = str(text).split("<br>")
        w, h = max(_px(line, size) for line in lines), size * 1.2 * len(lines)
        x0 = px if anchor == "left" else px - w if anchor == "right" else px - w / 2
        y0 = py + 6 if vertical == "top" else py - 6 - h if vertical == "bottom" else py - h / 2
        out.append((str(text), x0, x0 + w, y0, y0 + h))

    for a in layout.get("annotations", []) or []:
        xref, yref = a.get("xref", "x"), a.get("yref", "y")
        if xref.startswith("x") and yref.startswith("y") and "domain" not in xref + yref and xref != "paper":
            place(a.get("text", ""), a.get("x"), a.get("y"), xref, yref,
                  float(_get(a, "font", "size", default=base) or base), a.get("xanchor", "center"))
    for tr in fig.get("data", []):
        xa, ya = tr.get("xaxis", "x") or "x", tr.get("yaxis", "y") or "y"
        size = float(_get(tr, "textfont", "size", default=base) or base)
        if tr.get("type") == "scatter" and "text" in str(tr.get("mode", "")):
            texts, xs, ys = tr.get("text") or [], tr.get("x") or [], tr.get("y") or []
            texts = texts if isinstance(texts, (list, tuple)) else [texts] * len(xs)
            pos = tr.get("textposition", "middle center")
            positions = pos if isinstance(pos, (list, tuple)) else [pos] * len(xs)
            for t, x, y, p in zip(texts, xs, ys, positions):
                p = str(p)
                anchor = "left" if "right" in p else "right" if "left" in p else "center"
                place(t, x, y, xa, ya, size, anchor, "top" if "top" in p else "bottom" if "bottom" in p else "middle")
        if tr.get("type") == "bar" and tr.get("orientation") == "h" and tr.get("text"):
            base_x = tr.get("base") or [0] * len(tr.get("x") or [])
            for t, b, w, y in zip(tr.get("text"), base_x, tr.get("x") or [], tr.get("y") or []):
                if isinstance(b, (int, float)) and isinstance(w, (int, float)):
                    place(t, b + w / 2, y, xa, ya, size)
    return out


def overlapping_labels(fig: dict[str, Any], width: int = WIDTH) -> list[str]:
    boxes = _boxes(fig, width)
    problems = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if min(a[2], b[2]) - max(a[1], b[1]) > 2 and min(a[4], b[4]) - max(a[3], b[3]) > 2:
                problems.append(f"labels overlap: {a[0][:40]!r} and {b[0][:40]!r}")
    return problems


def missing_legend(fig: dict[str, Any]) -> list[str]:
    """A timeline (horizontal bars on lanes) whose bars carry more than one name has a legend."""
    layout = fig.get("layout", {})
    bars = [t for t in fig.get("data", []) if t.get("type") == "bar" and t.get("orientation") == "h"]
    names = {t.get("name") for t in bars if t.get("name")}
    if len(names) < 2:
        return []
    if layout.get("showlegend") is False or any(t.get("showlegend") is False for t in bars):
        return [f"a timeline with {len(names)} roles ({sorted(names)}) has no legend"]
    return []


def _decoded(value: Any) -> Any:
    """Plotly's JSON with typed arrays (``{"dtype": "f8", "bdata": ...}``) turned into lists."""
    if isinstance(value, dict):
        if "bdata" in value and "dtype" in value:
            import base64

            import numpy as np

            arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
            if value.get("shape"):
                shape = value["shape"]
                arr = arr.reshape([int(x) for x in str(shape).split(",")] if isinstance(shape, str) else shape)
            return arr.tolist()
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value


def as_json(fig: Any) -> dict[str, Any]:
    """A figure (plotly Figure, or a notebook output's JSON) as plain lists and dicts."""
    if hasattr(fig, "to_json"):
        import json

        fig = json.loads(fig.to_json())
    return _decoded(fig)


def problems(fig: Any, width: int = WIDTH) -> list[str]:
    """Every rule's problems for one figure (a plotly Figure or its JSON dict)."""
    fig = as_json(fig)
    return title_overflow(fig, width) + overlapping_labels(fig, width) + missing_legend(fig)
