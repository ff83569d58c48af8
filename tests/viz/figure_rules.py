"""Rules a notebook figure must pass to be read at a glance, as a static 900 px PNG.

Each rule is a pure function of a figure's JSON (``fig.to_plotly_json()`` or a notebook output's
``application/vnd.plotly.v1+json``) and returns a list of problems (empty: the rule holds):

* :func:`title_overflow` — every line of the title and subtitle fits the width;
* :func:`overlapping_labels` — no two text labels overlap (annotations, scatter text, bar text),
  estimated from their positions, font sizes and lengths;
* :func:`missing_legend` — a timeline whose bars have more than one role has a legend;
* :func:`labels_far_from_their_marks` — a label placed beside a mark (a median beside its box) is
  nearer that mark than any other;
* :func:`unnamed_shaded_blocks` — every shaded block (a frontend wait, a device band) at least a few
  pixels wide has a name written over it;
* :func:`colour_shared_by_roles` — one colour per role across a figure: two legend entries never share
  a colour;
* :func:`roles_that_misname_their_bars` — a bar drawn in a role says by its name that it is one (no
  ``aten::broadcast_tensors`` among the all-reduces, no all-reduce among "forward / other");
* :func:`subtitle_without_a_measured_fact` — a subtitle that states an outcome of the run (waiting,
  hidden, faster, ...) carries the measured number it rests on: a constant sentence is not a fact;
* :func:`time_before_zero` — time axes and animation sliders start at 0, never before;
* :func:`unnamed_lanes` — every lane (thread, device) an op ran on is named on the figure;
* :func:`cut_names` — no name on the figure is cut short with "…";
* :func:`crowded_tick_labels` — category labels fit their slot (plotly turns wider ones, and turned
  labels run into the axis title and the legend);
* :func:`missing_alt_text` — the figure carries its text alternative (``layout.meta["alt"]``).

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


def _boxes(fig: dict[str, Any], width: int) -> list[tuple[Any, ...]]:
    """(text, x0, x1, y0, y1, xaxis, yaxis, x, y), in pixels, for every text label placed in data
    coordinates; ``x, y`` is the point the label is anchored at."""
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
        out.append((str(text), x0, x0 + w, y0, y0 + h, xa, ya, px, py))

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
    """Every rule's problems for one figure (a plotly Figure or its JSON dict), each prefixed with
    the rule's name."""
    import inspect

    fig = as_json(fig)
    out = []
    for name, rule in RULES.items():
        found = rule(fig, width) if "width" in inspect.signature(rule).parameters else rule(fig)
        out += [f"{name}: {p}" for p in found]
    return out



# -- helpers for the rules below ------------------------------------------------------------------
_ELLIPSIS = "…"


def _plain(text: Any) -> str:
    return html.unescape(_TAG.sub("", str(text or ""))).strip()


def _lines(text: Any) -> list[str]:
    return [_plain(t) for t in re.split(r"<br\s*/?>", str(text or "")) if _plain(t)]


def _color(value: Any) -> str | None:
    """A colour as ``#rrggbb`` (alpha dropped), or None for anything that is not one colour."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower()
    m = re.fullmatch(r"#([0-9a-f]{6})", v)
    if m:
        return v
    m = re.fullmatch(r"rgba?\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*(?:,\s*[\d.]+\s*)?\)", v)
    if m:
        return "#" + "".join(f"{int(c):02x}" for c in m.groups())
    return None


def _trace_colour(tr: dict[str, Any]) -> str | None:
    if tr.get("fill") in ("toself", "tonexty", "tozeroy") and tr.get("fillcolor"):
        return _color(tr.get("fillcolor"))
    return _color(_get(tr, "marker", "color")) or _color(_get(tr, "line", "color"))


def _legend_entries(fig: dict[str, Any]) -> list[dict[str, Any]]:
    """The traces that show a legend entry (one per legend group)."""
    layout = fig.get("layout", {})
    if layout.get("showlegend") is False:
        return []
    out, groups = [], set()
    for tr in fig.get("data", []):
        if tr.get("showlegend") is False or not tr.get("name"):
            continue
        group = tr.get("legendgroup")
        if group and group in groups:
            continue
        if group:
            groups.add(group)
        out.append(tr)
    return out


def _visible_texts(fig: dict[str, Any]) -> list[str]:
    """Every piece of text a reader sees: titles, annotations, tick labels, legend names, mark text."""
    layout = fig.get("layout", {})
    texts = []
    title = layout.get("title") or {}
    title = {"text": title} if isinstance(title, str) else title
    texts += _lines(title.get("text")) + _lines(_get(title, "subtitle", "text"))
    texts += [t for a in layout.get("annotations", []) or [] for t in _lines(a.get("text"))]
    for key, axis in layout.items():
        if re.fullmatch(r"[xy]axis\d*", key) and isinstance(axis, dict):
            texts += [t for v in axis.get("ticktext") or [] for t in _lines(v)]
            texts += _lines(_get(axis, "title", "text"))
    texts += [_plain(tr.get("name")) for tr in _legend_entries(fig)]
    for tr in fig.get("data", []):
        text = tr.get("text")
        if isinstance(text, str):
            text = [text]
        if isinstance(text, (list, tuple)) and ("text" in str(tr.get("mode", "")) or tr.get("type") == "bar"):
            texts += [t for v in text if v for t in _lines(v)]
        if tr.get("type") in ("bar", "box") and tr.get("orientation") != "h":
            texts += [t for v in tr.get("x") or [] if isinstance(v, str) for t in _lines(v)]
        if tr.get("type") in ("bar", "box") and tr.get("orientation") == "h":
            texts += [t for v in tr.get("y") or [] if isinstance(v, str) for t in _lines(v)]
    return [t for t in texts if t]


def _plot_box(fig: dict[str, Any], width: int) -> tuple[float, float]:
    """(width, height) in pixels of the plotting area: the figure less its margins and, when the
    legend stands beside the plot, about 150 px of legend."""
    layout = fig.get("layout", {})
    margin = layout.get("margin") or {}
    beside = _get(layout, "legend", "orientation", default="v") != "h" and bool(_legend_entries(fig))
    w = float(layout.get("width") or width) - float(margin.get("l", 80)) - float(margin.get("r", 80)) - 150 * beside
    h = float(layout.get("height") or 450) - float(margin.get("t", 100)) - float(margin.get("b", 80))
    return w, h


def _axis(layout: dict[str, Any], ref: str) -> dict[str, Any]:
    key = ("xaxis" if ref.startswith("x") else "yaxis") + ref[1:]
    return layout.get(key) or {}


def _categories(fig: dict[str, Any], xref: str) -> list[str]:
    """The categories of a category x axis, in drawing order."""
    axis = _axis(fig.get("layout", {}), xref)
    if axis.get("categoryorder") == "array" and axis.get("categoryarray"):
        return [str(c) for c in axis["categoryarray"]]
    out: list[str] = []
    for tr in fig.get("data", []):
        if (tr.get("xaxis") or "x") == xref:
            for v in tr.get("x") or []:
                if isinstance(v, str) and v not in out:
                    out.append(v)
    return out


def _domain_px(fig: dict[str, Any], xref: str, width: int) -> float:
    plot_w, _ = _plot_box(fig, width)
    dom = _axis(fig.get("layout", {}), xref).get("domain") or [0, 1]
    return plot_w * (float(dom[1]) - float(dom[0]))


# -- the rules -----------------------------------------------------------------------------------
def labels_far_from_their_marks(fig: dict[str, Any], width: int = WIDTH) -> list[str]:
    """A label anchored at a category (``x="print"``) and pushed aside (``xshift``) must still be
    nearer its own category's mark than any other category's: 04's "median 57.8 µs" sat under the
    next box."""
    layout = fig.get("layout", {})
    base = float(_get(layout, "font", "size", default=12) or 12)
    problems = []
    for a in layout.get("annotations", []) or []:
        xref = a.get("xref", "x") or "x"
        if not xref.startswith("x") or "domain" in xref or xref == "paper" or not isinstance(a.get("x"), str):
            continue
        cats = _categories(fig, xref)
        if a["x"] not in cats or len(cats) < 2:
            continue
        slot = _domain_px(fig, xref, width) / len(cats)
        own = cats.index(a["x"])
        size = float(_get(a, "font", "size", default=base) or base)
        w = max(_px(line, size) for line in _lines(a.get("text")) or [""])
        x0 = (own + 0.5) * slot + float(a.get("xshift") or 0)
        anchor = a.get("xanchor", "center")
        centre = x0 + w / 2 if anchor == "left" else x0 - w / 2 if anchor == "right" else x0
        nearest = min(range(len(cats)), key=lambda i: abs((i + 0.5) * slot - centre))
        if nearest != own:
            problems.append(f"label {_plain(a.get('text'))[:40]!r} of {a['x']!r} is nearer {cats[nearest]!r}'s mark")
    return problems


def _polygons(xs: list[Any], ys: list[Any]) -> list[tuple[float, float, float, float]]:
    """(x0, x1, y0, y1) of each polygon of a ``fill="toself"`` trace (polygons split at None/NaN)."""
    out, px, py = [], [], []
    for x, y in list(zip(xs, ys)) + [(None, None)]:
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x == x and y == y:
            px.append(float(x))
            py.append(float(y))
        elif px:
            out.append((min(px), max(px), min(py), max(py)))
            px, py = [], []
    return out


def unnamed_shaded_blocks(fig: dict[str, Any], width: int = WIDTH, min_px: float = 6.0) -> list[str]:
    """Every shaded block at least ``min_px`` wide (a filled polygon or a filled rectangle shape, not
    the white curtain of an animation) has a text label anchored inside it: 04's timeline named 2 of
    5 waits."""
    maps = _axis_maps(fig, width)
    layout = fig.get("layout", {})
    blocks: dict[tuple[str, str, float, float], list[float]] = {}
    for tr in fig.get("data", []):
        if tr.get("fill") != "toself" or _color(tr.get("fillcolor")) in (None, "#ffffff"):
            continue
        xa, ya = tr.get("xaxis", "x") or "x", tr.get("yaxis", "y") or "y"
        for x0, x1, y0, y1 in _polygons(tr.get("x") or [], tr.get("y") or []):
            key = (xa, ya, round(x0, 9), round(x1, 9))
            lo, hi = blocks.get(key, [y0, y1])
            if y1 - y0 <= hi - lo:  # a band over every lane and a strong one on the frontend: the lane's own
                blocks[key] = [y0, y1]
    for sh in layout.get("shapes", []) or []:
        if sh.get("type") == "rect" and _color(sh.get("fillcolor")) not in (None, "#ffffff") and \
                "paper" not in str(sh.get("xref", "x")) + str(sh.get("yref", "y")):
            xa, ya = str(sh.get("xref", "x")).replace(" domain", ""), str(sh.get("yref", "y")).replace(" domain", "")
            try:
                key = (xa, ya, round(float(sh["x0"]), 9), round(float(sh["x1"]), 9))
                blocks[key] = [min(float(sh["y0"]), float(sh["y1"])), max(float(sh["y0"]), float(sh["y1"]))]
            except (KeyError, TypeError, ValueError):
                continue
    anchors: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for *_box, xa, ya, px, py in _boxes(fig, width):
        anchors.setdefault((xa, ya), []).append((px, py))
    problems = []
    for (xa, ya, x0, x1), (y0, y1) in blocks.items():
        if xa not in maps or ya not in maps:
            continue
        (xlo, xs), (ylo, ys) = maps[xa], maps[ya]
        p0, p1 = (x0 - xlo) * xs, (x1 - xlo) * xs
        if p1 - p0 < min_px:
            continue
        q0, q1 = sorted(((y0 - ylo) * ys, (y1 - ylo) * ys))
        # a label names the block its anchor point lies in (a long label of the next block that
        # merely passes over it does not)
        named = any(p0 - 1 <= ax <= p1 + 1 and q0 - 1 <= ay <= q1 + 1 for ax, ay in anchors.get((xa, ya), []))
        if not named:
            problems.append(f"a shaded block {x0:.4g}–{x1:.4g} ({p1 - p0:.0f} px wide) has no name over it")
    return problems


def _mark(tr: dict[str, Any]) -> str:
    """How a legend entry looks: an area (bar, box, filled shape), a line, or markers."""
    if tr.get("type") in ("bar", "box", "histogram") or tr.get("fill") in ("toself", "tonexty", "tozeroy"):
        return "area"
    return "line" if "lines" in str(tr.get("mode", "lines")) else "markers"


def colour_shared_by_roles(fig: dict[str, Any]) -> list[str]:
    """One colour per role: two legend entries of the same look (two areas, two lines; outside one
    legend group) never share a colour — 06's backward and memset bars were both #CC79A7."""
    by_colour: dict[tuple[str, str], list[str]] = {}
    for tr in _legend_entries(fig):
        colour = _trace_colour(tr)
        if colour:
            by_colour.setdefault((_mark(tr), colour), []).append(_plain(tr.get("name")))
    return [f"{colour} is the colour of {', '.join(repr(n) for n in names)} ({mark}s)"
            for (mark, colour), names in by_colour.items() if len(set(names)) > 1]


_COLLECTIVE = re.compile(r"all_?reduce|all-reduce|allgather|all_gather|reduce_scatter|c10d::|gloo:|nccl|"
                         r"record_param_comms|ProcessGroup", re.I)
_BAR_NAME = re.compile(r"^<b>(?:\d[\d,]* events from )?(.*?)</b>")


def roles_that_misname_their_bars(fig: dict[str, Any]) -> list[str]:
    """A bar in the "all-reduce" role is a collective by its own name, and a collective is in no
    other role: 09's CPU profile listed ``aten::broadcast_tensors`` as an all-reduce, and 10's modelled
    link drew its all-reduces as "forward / other"."""
    problems = []
    for tr in fig.get("data", []):
        if tr.get("type") != "bar" or not tr.get("hovertext"):
            continue
        role = _plain(tr.get("name"))
        names = sorted({m.group(1) for h in tr["hovertext"] if (m := _BAR_NAME.match(str(h)))})
        if role == "all-reduce":
            wrong = [n for n in names if not _COLLECTIVE.search(n)]
            if wrong:
                problems.append(f"the all-reduce role holds bars that are no collective: {wrong[:3]}")
        elif role in ("forward / other", "backward", "optimizer step"):
            wrong = [n for n in names if _COLLECTIVE.search(n)]
            if wrong:
                problems.append(f"collectives drawn in the {role!r} role: {wrong[:3]}")
    return problems


#: Words of an outcome: a subtitle clause that uses one states something about the run.
_OUTCOME = re.compile(r"\b(wait(?:s|ed|ing)?|hidden|hides?|exposed|faster|slower|shorter|longer|sav(?:es|ed)|"
                      r"slows?|grows?|shrinks?|stall(?:s|ed)?|overlap(?:s|ped)?|beats?|wins?|loses?)\b", re.I)


def subtitle_without_a_measured_fact(fig: dict[str, Any]) -> list[str]:
    """A subtitle clause (the lines below the title's first, split at ``;``) that states an outcome
    must carry the measured number it rests on: 10's "the even ranks' extra communication is waiting
    for the straggler" was the same sentence for every run, whatever the run showed."""
    layout = fig.get("layout", {})
    title = layout.get("title") or {}
    title = {"text": title} if isinstance(title, str) else title
    lines = _lines(title.get("text"))[1:] + _lines(_get(title, "subtitle", "text"))
    problems = []
    for clause in (c.strip() for line in lines for c in line.split(";")):
        if clause and _OUTCOME.search(clause) and not re.search(r"\d", clause):
            problems.append(f"a subtitle states an outcome with no measured number: {clause[:80]!r}")
    return problems


def time_before_zero(fig: dict[str, Any]) -> list[str]:
    """Time axes and animation sliders start at 0: 02's and 07's sliders began at −3.69 ms and −6.7 ms."""
    layout = fig.get("layout", {})
    problems = []
    for key, axis in layout.items():
        if not (re.fullmatch(r"xaxis\d*", key) and isinstance(axis, dict)):
            continue
        if "time" in _plain(_get(axis, "title", "text")).lower():
            rng = axis.get("range")
            if isinstance(rng, (list, tuple)) and len(rng) == 2 and isinstance(rng[0], (int, float)) and rng[0] < -1e-9:
                problems.append(f"{key} (a time axis) starts at {rng[0]:.4g}")
    for slider in layout.get("sliders", []) or []:
        prefix = _plain(_get(slider, "currentvalue", "prefix", default=""))
        values = []
        for step in slider.get("steps", []) or []:
            try:
                values.append(float(str(step.get("label", "")).replace(",", "")))
            except ValueError:
                pass
        if "time" in prefix.lower() and values and min(values) < 0:
            problems.append(f"the time slider starts at {min(values):.4g}")
    return problems


_ON_LANE = re.compile(r"</b>\s*(?:\(\w+ on (?P<a>.+?)\)<br>| on (?P<b>[^<]+?)<br>)")


def unnamed_lanes(fig: dict[str, Any]) -> list[str]:
    """Every lane an op ran on (``"<b>mul</b> on cpu:1 worker 0"`` in its hover) is named on the
    figure, by the lane or by its device (``cpu:1``): 07's graph drew three unnamed bands."""
    lanes = set()
    for tr in fig.get("data", []):
        for h in tr.get("hovertext") or []:
            m = _ON_LANE.search(str(h))
            if m:
                lanes.add((m.group("a") or m.group("b")).strip())
    if not lanes:
        return []
    shown = _visible_texts(fig)
    problems = []
    for lane in sorted(lanes):
        device = re.split(r" worker \d+| stream \d+", lane)[0]
        # the lane or its device as a name of its own ("cpu:1", "ops on cpu:1"), not inside another
        # name ("W1@cpu:1" names the array, not the lane)
        named = re.compile(rf"(?:^|[\s,(]){re.escape(device)}(?:$|[\s,):])")
        if not any(named.search(t) for t in shown):
            problems.append(f"ops ran on {lane!r}, which the figure does not name")
    return problems


def cut_names(fig: dict[str, Any]) -> list[str]:
    """No name on the figure is cut short with "…" (07's ``X0.0@cp…``)."""
    cut = sorted({t for t in _visible_texts(fig) if t.endswith(_ELLIPSIS)})
    return [f"a name is cut short: {t!r}" for t in cut]


def crowded_tick_labels(fig: dict[str, Any], width: int = WIDTH) -> list[str]:
    """The categories of a bar or box axis fit their slots; a wider label is turned by plotly and
    runs into the axis title and the legend (10's "after_backward · rank 0")."""
    layout = fig.get("layout", {})
    size = float(_get(layout, "font", "size", default=12) or 12)
    problems = []
    axes = {tr.get("xaxis", "x") or "x" for tr in fig.get("data", [])
            if tr.get("type") in ("bar", "box") and tr.get("orientation") != "h"}
    for xref in sorted(axes):
        cats = _categories(fig, xref)
        if not cats or not all(isinstance(c, str) for c in cats):
            continue
        slot = _domain_px(fig, xref, width) / len(cats)
        axis = _axis(layout, xref)
        drawn = [str(t) for t in axis["ticktext"]] if axis.get("ticktext") and axis.get("tickvals") else cats
        widest = max(_px(line, size) for c in drawn for line in (_lines(c) or [""]))
        if widest > slot:
            problems.append(f"category labels up to ~{widest:.0f} px wide in slots of {slot:.0f} px on {xref}")
    return problems


def missing_alt_text(fig: dict[str, Any]) -> list[str]:
    """The figure carries a text alternative computed from its data (``layout.meta["alt"]``)."""
    meta = fig.get("layout", {}).get("meta")
    alt = meta.get("alt") if isinstance(meta, dict) else None
    if not alt or not str(alt).strip():
        return ["no text alternative (layout.meta['alt']): a screen reader gets nothing"]
    return []


#: Every rule, by name: a function of a figure's JSON returning its problems.
RULES = {
    "title_overflow": title_overflow,
    "overlapping_labels": overlapping_labels,
    "missing_legend": missing_legend,
    "labels_far_from_their_marks": labels_far_from_their_marks,
    "unnamed_shaded_blocks": unnamed_shaded_blocks,
    "colour_shared_by_roles": colour_shared_by_roles,
    "roles_that_misname_their_bars": roles_that_misname_their_bars,
    "subtitle_without_a_measured_fact": subtitle_without_a_measured_fact,
    "time_before_zero": time_before_zero,
    "unnamed_lanes": unnamed_lanes,
    "cut_names": cut_names,
    "crowded_tick_labels": crowded_tick_labels,
    "missing_alt_text": missing_alt_text,
}
