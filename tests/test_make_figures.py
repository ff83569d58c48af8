"""`make figures` renders PNGs on a fresh clone: kaleido >= 1 drives the
machine's Chromium.  Without Chromium the test skips, except under CI=true (a failure there)."""

from __future__ import annotations

import importlib.util
import os
import struct
from pathlib import Path

import plotly.graph_objects as go
import pytest

from tests.conftest import CHROMIUM, skip_or_fail

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "make_figures.py"


def load_script():
    spec = importlib.util.spec_from_file_location("make_figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.browser
@pytest.mark.timeout(180)
def test_one_figure_renders_to_a_png(tmp_path, monkeypatch):
    if not os.path.exists(CHROMIUM):
        skip_or_fail(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    pytest.importorskip("kaleido", reason="kaleido>=1 is in the dev extra: pip install -e .[dev]")
    monkeypatch.setenv("BROWSER_PATH", CHROMIUM)
    script = load_script()
    fig = go.Figure(go.Bar(x=["sync", "async"], y=[91.5, 11.5]), layout=dict(height=300))
    (png,) = script.render_pngs({"bars": fig}, tmp_path, width=400)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert (width, height) == (400, 300)


class _Kaleido:
    """plotly.io as render_pngs sees it, writing only the figures ``writes`` lets it (plotly drops
    kaleido's per-figure errors: a failed render is a missing file, not an exception)."""

    def __init__(self, writes):
        self.writes, self.calls = writes, []

    def write_images(self, figs, files, **kwargs):
        self.calls.append([f.name for f in files])
        for f in files:
            if self.writes(len(self.calls), f.name):
                f.write_bytes(b"\x89PNG\r\n\x1a\n")


def test_a_render_kaleido_dropped_is_tried_once_more(tmp_path, monkeypatch):
    pytest.importorskip("kaleido", reason="kaleido>=1 is in the dev extra: pip install -e .[dev]")
    script = load_script()
    fake = _Kaleido(lambda call, name: call > 1 or name == "a.png")  # b fails the first time
    monkeypatch.setattr(script, "pio", fake)
    figs = {"a": go.Figure(), "b": go.Figure()}
    paths = script.render_pngs(figs, tmp_path, width=400)
    assert [p.name for p in paths] == ["a.png", "b.png"] and all(p.exists() for p in paths)
    assert fake.calls == [["a.png", "b.png"], ["b.png"]]  # only the dropped one again


def test_a_render_kaleido_drops_twice_is_a_clear_error_not_a_missing_file(tmp_path, monkeypatch):
    pytest.importorskip("kaleido", reason="kaleido>=1 is in the dev extra: pip install -e .[dev]")
    script = load_script()
    monkeypatch.setattr(script, "pio", _Kaleido(lambda call, name: name == "a.png"))
    with pytest.raises(RuntimeError, match=r"no PNG for b\.png, twice"):
        script.render_pngs({"a": go.Figure(), "b": go.Figure()}, tmp_path, width=400)
