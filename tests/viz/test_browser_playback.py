"""The animations play in plain plotly.js (no kernel): open exported HTML in headless Chromium,
press play, and check that the frames advanced and the figure reached the states they promise."""

from __future__ import annotations

import pytest
from viz_traces import engine_like

from d2l_async import viz

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


def _open(browser, fig, tmp_path):
    path = tmp_path / "fig.html"
    fig.write_html(path, include_plotlyjs=True, auto_play=False)  # self-contained: no network
    page = browser.new_page()  # the suite's one Chromium (tests/conftest.py)
    page.set_viewport_size({"width": 1200, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("() => { const gd = document.querySelector('.js-plotly-plot');"
                           " return gd && gd._fullLayout && gd._transitionData; }", timeout=30_000)
    return page, errors


def test_dependency_graph_plays_to_the_end(browser, tmp_path):
    fig = viz.plot_dependency_graph("z = x * y + 2")
    page, errors = _open(browser, fig, tmp_path)
    js_states = ("() => { const gd = document.querySelector('.js-plotly-plot');"
                 " const t = gd.data.find(d => d.customdata && d.mode === 'markers+text');"
                 " return Array.from(t.customdata); }")
    assert "not issued" in page.evaluate(js_states)
    page.get_by_text("▶ play").click()
    page.wait_for_function("() => document.querySelector('.js-plotly-plot')._fullLayout.sliders[0].active"
                           f" === {len(fig.frames) - 1}", timeout=30_000)
    page.wait_for_timeout(200)
    assert set(page.evaluate(js_states)) == {"done"}
    assert errors == []


def test_animated_timeline_moves_its_curtain(browser, tmp_path):
    fig = viz.animate_timeline(engine_like(40), max_frames=30)
    page, errors = _open(browser, fig, tmp_path)
    js_curtain = "() => document.querySelector('.js-plotly-plot').data[%d].x[0]" % (len(fig.data) - 4)
    x0 = page.evaluate(js_curtain)
    page.get_by_text("▶ play").click()
    page.wait_for_function("() => document.querySelector('.js-plotly-plot')._fullLayout.sliders[0].active >= 5",
                           timeout=30_000)
    assert page.evaluate(js_curtain) > x0
    assert errors == []
