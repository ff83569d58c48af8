"""Writing the report: one self-contained HTML file (plotly.js embedded once) and a JSON of numbers."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any, Sequence

from .._args import having, instance, sequence
from ._table import HEADER, Row

__all__ = ["render_html", "write_json", "to_jsonable", "section_html", "page_html", "write_text"]

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; width: 100%; font-size: 0.92em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.35em 0.5em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.banner { background: #fff6d6; border: 1px solid #e0c96b; padding: 0.6em 1em; border-radius: 4px; }
.note { color: #555; font-size: 0.9em; }
.error { background: #fdecea; border: 1px solid #e0a39b; padding: 0.6em 1em; overflow-x: auto; font-size: 0.85em; }
figure { margin: 1.5em 0; }
figcaption { font-weight: 600; margin-bottom: 0.3em; }
"""


def _table_html(rows: Sequence[Row]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r.cells()) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _book_html(book: Sequence[Any]) -> str:
    if not book:
        return ""
    items = "".join(f"<li><b>{html.escape(f'{n.value:g} {n.unit}')}</b> — {html.escape(n.what)} "
                    f"<span class='note'>({html.escape(n.source)})</span></li>" for n in book)
    return f"<h2>The book's numbers</h2><ul>{items}</ul>"


def render_html(*, title: str, banner: str, rows: Sequence[Row], sections: Sequence[dict[str, Any]],
                book: Sequence[Any] = ()) -> str:
    """The report page.

    Args:
        title: page title.
        banner: what the numbers ran on (shown at the top).
        rows: the results table.
        sections: dicts with ``title``, ``figures`` (``(caption, go.Figure)`` pairs), ``notes``,
            ``checks`` (:class:`d2l_async.lesson.Check`, rendered with their marks and reasons) and
            ``error`` (a failed step's traceback, rendered as it is; empty when the step ran).
        book: :class:`~d2l_async.experiments.BookNumber` records, listed with their sources.

    Returns:
        The whole HTML document as one string: plotly.js inlined, the banner, the results table, the book's numbers
        and one section per entry of ``sections``.
    """
    instance("title", title, str)
    instance("banner", banner, str)
    rows = [having("rows", r, ("cells",), what="a sequence of report Rows") for r in sequence("rows", rows, what="Rows")]
    book = [having("book", b, ("key", "value", "unit", "source"), what="a sequence of BookNumbers")
            for b in sequence("book", book, what="BookNumbers")]
    sections = [instance("sections", s, dict, what="sequence of dicts") for s in sequence("sections", sections, what="dicts")]
    return page_html(title, banner, rows, book, [section_html(sec) for sec in sections])


def section_html(sec: dict[str, Any]) -> str:
    """One section of the page (see :func:`render_html`'s ``sections``): rendered once, however often the page
    around it is written."""
    parts = [f"<h2>{html.escape(sec['title'])}</h2>"]
    if sec.get("error"):
        parts.append("<p class='note'>This step failed; the other steps' results are kept.</p>"
                     f"<pre class='error'>{html.escape(sec['error'])}</pre>")
    for caption, fig in sec.get("figures", ()):
        div = fig.to_html(full_html=False, include_plotlyjs=False, config={"responsive": True})
        parts.append(f"<figure><figcaption>{html.escape(caption)}</figcaption>{div}</figure>")
    for note in sec.get("notes", ()):
        parts.append(f"<p class='note'>{html.escape(note)}</p>")
    for check in sec.get("checks", ()):  # lesson.Check: ✔/✘, the claim, this run's numbers, why
        parts.append(check._repr_html_())
    return "\n".join(parts)


def page_html(title: str, banner: str, rows: Sequence[Row], book: Sequence[Any], sections: Sequence[str]) -> str:
    """The page around sections already rendered (:func:`section_html`); arguments as checked by
    :func:`render_html`."""
    from plotly.offline import get_plotlyjs

    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>",
             f"<h1>{html.escape(title)}</h1><p class='banner'>{html.escape(banner)}</p>",
             "<p class='note'>The book's numbers were measured by D2L's authors with MXNet on their machine; "
             "ours are measured by this run. A virtual device is a thread on this CPU, not a GPU.</p>",
             "<h2>Results</h2>", _table_html(rows), _book_html(book), *sections, "</body></html>"]
    return "\n".join(parts)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, then renamed over it (a
    run stopped while writing leaves the previous file, never half of one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def to_jsonable(value: Any) -> Any:
    """Plain JSON types: numpy scalars to Python, NaN/inf to None, tuples to lists."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def write_json(path: Path, data: dict[str, Any]) -> Path:
    """Write ``data`` as indented UTF-8 JSON (through :func:`to_jsonable`) to ``path``, replacing it whole
    (:func:`write_text`).

    Returns:
        ``path``.
    """
    instance("path", path, Path, what="pathlib.Path")
    return write_text(path, json.dumps(to_jsonable(data), indent=2, ensure_ascii=False))
