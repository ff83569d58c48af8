from __future__ import annotations

import plotly.graph_objects as go

from d2l_async.report import Row, render_html


def test_plotly_js_embedded_once_and_every_figure_drawn():
    figs = [("first <figure>", go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))), ("second", go.Figure(go.Bar(x=[1], y=[2])))]
    page = render_html(title="T", banner="Ran on: CPU", rows=[Row("e", "b", "o", "d<evice>")],
                       sections=[{"title": "S1", "figures": figs, "notes": ("a note",)}])
    assert page.count("Plotly.newPlot") == 2
    assert page.count("plotly.js v") <= 2 and len(page) > 3_000_000  # the library itself is inside, once
    assert "<script src=" not in page  # self-contained: nothing fetched from a CDN
    assert "first &lt;figure&gt;" in page and "d&lt;evice&gt;" in page  # escaped
    assert "MXNet" in page and "a note" in page
    assert "<h2>The book's numbers</h2>" not in page  # no book list unless given


def test_book_numbers_listed_with_sources():
    from d2l_async.experiments import BOOK

    page = render_html(title="T", banner="b", rows=[], sections=[], book=tuple(BOOK.values()))
    assert "<h2>The book's numbers</h2>" in page and "3.16 s" in page and "§13.2.3 Improving Computation (MXNet)" in page
