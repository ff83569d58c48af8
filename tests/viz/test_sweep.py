from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go
import pytest

from d2l_async.viz import plot_sweep, sweep_table


@dataclass(frozen=True)
class Point:
    ops: int
    numel: int
    sync_seconds: float
    async_seconds: float

    @property
    def ratio(self) -> float:
        return self.sync_seconds / self.async_seconds


@dataclass(frozen=True)
class Sweep:
    points: tuple[Point, ...]
    device: str = "CPU engine, 1 virtual device (threads)"


def sweep() -> Sweep:
    # ops varying fastest, as sweep_sync_async orders them; ratios 4, 3 (1 element) and 1.5, 1.0 (10**6)
    return Sweep((Point(1000, 1, 4.0, 1.0), Point(100, 1, 3.0, 1.0),
                  Point(100, 10**6, 3.0, 2.0), Point(1000, 10**6, 2.0, 2.0)))


def test_table_is_one_row_per_point():
    assert sweep_table(sweep()) == [{"ops": 1000, "numel": 1, "ratio": 4.0}, {"ops": 100, "numel": 1, "ratio": 3.0},
                                    {"ops": 100, "numel": 10**6, "ratio": 1.5}, {"ops": 1000, "numel": 10**6, "ratio": 1.0}]


def test_one_line_per_tensor_size_sorted_by_ops():
    fig = plot_sweep(sweep())
    lines = [t for t in fig.data if isinstance(t, go.Scatter)]
    assert [t.name for t in lines] == ["1 elements", "1,000,000 elements"]
    assert list(lines[0].x) == [100, 1000] and list(lines[0].y) == [3.0, 4.0]
    assert list(lines[1].x) == [100, 1000] and list(lines[1].y) == [1.5, 1.0]
    assert lines[0].line.color != lines[1].line.color
    assert fig.layout.xaxis.type == "log"
    assert any(s.y0 == 1.0 and s.y1 == 1.0 for s in fig.layout.shapes)  # the no-advantage line


def test_title_is_short_with_the_device_below():
    fig = plot_sweep(sweep())
    head, _, rest = fig.layout.title.text.partition("<br>")
    assert len(head) <= 60 and "virtual device" in rest and fig.layout.margin.t >= 90
    assert plot_sweep(sweep(), title="mine").layout.title.text == "mine"


def test_bad_sweeps():
    with pytest.raises(TypeError, match="points"):
        plot_sweep([1, 2])
    with pytest.raises(TypeError, match="ops, numel and ratio"):
        plot_sweep(Sweep((object(),)))
    assert any("no sweep points" in a.text for a in plot_sweep(Sweep(())).layout.annotations)


def test_subtitle_says_the_machine_when_the_sweep_recorded_it():
    from dataclasses import dataclass as _dc

    @_dc(frozen=True)
    class FakeMachine:
        def describe(self) -> str:
            return "1 usable CPU (pinned to 1 of 2), load 1.0; no GPU"

    @_dc(frozen=True)
    class MachineSweep(Sweep):
        machine: FakeMachine = FakeMachine()

    rest = plot_sweep(MachineSweep(sweep().points)).layout.title.text.partition("<br>")[2]
    assert "virtual device" in rest and "1 usable CPU (pinned to 1 of 2)" in rest


def test_by_tensor_size_one_line_per_op_count_with_the_books_ratio():
    fig = plot_sweep(sweep(), by="numel", reference={"the book's 3.4x": 3.4})
    lines = {tr.name: (list(tr.x), list(tr.y)) for tr in fig.data}
    assert lines == {"100 ops": ([1, 10**6], [3.0, 1.5]), "1,000 ops": ([1, 10**6], [4.0, 1.0])}
    assert sorted(s.y0 for s in fig.layout.shapes) == [1.0, 3.4]
    assert fig.layout.xaxis.title.text == "elements of x"
    from d2l_async.viz import alt_text

    assert "from 1.00×" in alt_text(fig) and "to 4.00×" in alt_text(fig) and "3.4×" in alt_text(fig)
    with pytest.raises(ValueError, match="by must be"):
        plot_sweep(sweep(), by="size")
    with pytest.raises(TypeError, match="positive ratio"):
        plot_sweep(sweep(), reference={"x": -1})
