from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import pytest

from d2l_async.viz import measurement_table, plot_measurements, plot_scheduling_overhead


@dataclass(frozen=True)
class FakeMeasurement:
    raw: tuple[float, ...]
    label: str = ""
    synchronized: bool = True


def test_boxes_hold_every_raw_run_side_by_side():
    fig = plot_measurements({"naive": [0.001, 0.0012, 0.0011], "synchronized": [0.010, 0.011, 0.012]})
    boxes = [t for t in fig.data if isinstance(t, go.Box)]
    assert [b.name for b in boxes] == ["naive", "synchronized"]
    np.testing.assert_allclose(boxes[0].y, [1.0, 1.2, 1.1])  # shown in ms
    assert boxes[0].boxpoints == "all"
    assert "(ms" in fig.layout.yaxis.title.text
    assert boxes[0].marker.color != boxes[1].marker.color


def test_book_numbers_are_reference_marks_labelled_book():
    fig = plot_measurements({"synchronized": [1.0, 1.1]}, book={"synchronized": 1.05, "numpy": 0.5})
    book = next(t for t in fig.data if t.name and "book" in t.name)
    # each book number in a column of its own, right after the measured column it compares with
    assert list(book.x) == ["the book: synchronized", "the book: numpy"] and list(book.y) == [1.05, 0.5]
    assert set(book.text) == {"book"}
    assert not set(book.x) & {x for t in fig.data if t is not book for x in t.x}
    assert list(fig.layout.xaxis.categoryarray) == ["synchronized", "the book: synchronized", "the book: numpy"]


def test_accepts_measurement_objects_and_uses_log_scale_for_wide_ranges():
    ms = [FakeMeasurement((0.001, 0.0011), "naive", synchronized=False), FakeMeasurement((1.0, 1.2), "synced")]
    table = measurement_table(ms)
    assert list(table["label"].unique()) == ["naive", "synced"]
    assert list(table["synchronized"]) == [False, False, True, True]
    fig = plot_measurements(ms)
    assert fig.layout.yaxis.type == "log" and "log scale" in fig.layout.yaxis.title.text


def test_bad_measurements():
    with pytest.raises(TypeError, match="mapping"):
        plot_measurements(3.0)
    with pytest.raises(TypeError, match="Measurement"):
        plot_measurements([1.0, 2.0])
    with pytest.raises(ValueError, match="no runs"):
        plot_measurements({"x": []})
    with pytest.raises(ValueError, match="seconds"):
        plot_measurements({"x": [-1.0]})
    with pytest.raises(TypeError, match="book"):
        plot_measurements({"x": [1.0]}, book={"x": "fast"})
    assert any("no measurements" in a.text for a in plot_measurements({}).layout.annotations)


def test_scheduling_overhead_lines_per_label():
    rows = [{"workers": w, "per_op_us": 10.0 * w, "spread_us": 1.0, "label": lbl}
            for lbl in ("threaded", "naive") for w in (4, 1, 2)]
    fig = plot_scheduling_overhead(rows)
    assert [t.name for t in fig.data] == ["threaded", "naive"]
    assert list(fig.data[0].x) == [1, 2, 4] and list(fig.data[0].y) == [10.0, 20.0, 40.0]
    assert list(fig.data[0].error_y.array) == [1.0, 1.0, 1.0]
    assert "µs" in fig.layout.yaxis.title.text
    with pytest.raises(ValueError, match="per_op_us"):
        plot_scheduling_overhead([{"workers": 1}])
    with pytest.raises(TypeError):
        plot_scheduling_overhead(5)


@dataclass(frozen=True)
class FakeOverhead:
    workers: int
    per_op_us: float
    runs: tuple[float, ...]


def test_scheduling_overhead_accepts_engine_results_and_shows_each_run():
    fig = plot_scheduling_overhead([FakeOverhead(2, 12.0, (11.0, 12.0, 15.0)), FakeOverhead(1, 8.0, (8.0, 7.0, 9.0))])
    runs, median = fig.data
    assert sorted(runs.y) == [7.0, 8.0, 9.0, 11.0, 12.0, 15.0]
    assert list(median.x) == [1, 2] and list(median.y) == [8.0, 12.0]
    # the error bar spans the quartiles of the runs (never ±(max − min))
    assert list(median.error_y.array) == [0.5, 1.5] and list(median.error_y.arrayminus) == [0.5, 0.5]


def test_scheduling_overhead_error_bars_never_go_below_zero():
    fig = plot_scheduling_overhead([FakeOverhead(1, 20.0, (5.0, 20.0, 300.0))])
    _, median = fig.data
    assert median.y[0] - median.error_y.arrayminus[0] >= 5.0  # not below the fastest run
    spread = plot_scheduling_overhead([{"workers": 1, "per_op_us": 10.0, "spread_us": 130.0}])
    bar = spread.data[0].error_y
    assert list(bar.array) == [130.0] and list(bar.arrayminus) == [10.0]  # stops at 0
