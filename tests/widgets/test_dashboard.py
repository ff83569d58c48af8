"""The dashboard: setting a control's value reruns the experiment and updates the same figure."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from d2l_async.widgets import Dashboard, dropdown, int_slider, log_slider


class Recorder:
    """A fake experiment: records its calls; raises for ``n == 13``."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, *, n: int, shape: str = "square", offset: int = 0):
        self.calls.append({"n": n, "shape": shape, "offset": offset})
        if n == 13:
            raise ValueError("n=13 is unlucky")
        if n == 0:
            raise KeyboardInterrupt
        xs = list(range(n))
        ys = [x * x + offset if shape == "square" else x + offset for x in xs]
        return {"x": xs, "y": ys}


def line(r):
    return go.Figure(go.Scatter(x=r["x"], y=r["y"]))


def bars(r):
    # one bar trace per 5 points: the number of traces follows the workload
    return go.Figure([go.Bar(x=[i], y=[r["y"][i]]) for i in range(0, len(r["x"]), 5)])


def make(mode="figurewidget", **kw):
    exp = Recorder()
    controls = {"n": int_slider("n", 5, 0, 50), "shape": dropdown("shape", ["square", "linear"])}
    d = Dashboard(exp, controls, {"line": line, "bars": bars}, mode=mode, **kw)
    return d, exp


def test_first_run_uses_the_defaults():
    d, exp = make(fixed={"offset": 1})
    assert exp.calls == [{"n": 5, "shape": "square", "offset": 1}]
    assert d.runs == 1 and d.result["y"][-1] == 17
    assert list(d.figure_widgets["line"].data[0].y) == [1, 2, 5, 10, 17]
    assert "Ran with" in d.status.value


def _on_screen(d) -> list:
    """The widgets in the dashboard's tree, depth first."""
    out, todo = [], [d.widget]
    while todo:
        w = todo.pop(0)
        out.append(w)
        todo[:0] = list(getattr(w, "children", ()))
    return out


def _replaced(d, name, old):
    """The figure ``name`` is a new widget in the old one's place; the old one is closed (no comm)."""
    new = d.figure_widgets[name]
    shown = _on_screen(d)
    assert new is not old and new in shown and old not in shown and old.comm is None
    return new


def test_changing_a_control_reruns_and_draws_a_new_widget_in_the_old_ones_place():
    # a new FigureWidget per drawing: a plotly view redraws from the state it had when it was attached, so
    # one re-attached by the page while a restyle arrived kept the last run but one (the browser test)
    d, exp = make()
    fw = d.figure_widgets["line"]
    d.controls["n"].value = 8
    assert exp.calls[-1] == {"n": 8, "shape": "square", "offset": 0} and d.runs == 2
    fw = _replaced(d, "line", fw)
    assert list(fw.data[0].x) == list(range(8)) and list(fw.data[0].y) == [x * x for x in range(8)]
    d.controls["shape"].value = "linear"
    fw = _replaced(d, "line", fw)
    assert exp.calls[-1]["shape"] == "linear" and list(fw.data[0].y) == list(range(8))


def test_trace_count_follows_the_result():
    d, _ = make()
    fw = d.figure_widgets["bars"]
    assert len(fw.data) == 1
    d.controls["n"].value = 21
    fw = _replaced(d, "bars", fw)
    assert len(fw.data) == 5
    d.controls["n"].value = 3
    assert len(_replaced(d, "bars", fw).data) == 1


def test_an_error_is_shown_not_raised_and_the_next_change_works():
    d, exp = make()
    fw = d.figure_widgets["line"]
    d.controls["n"].value = 13  # must not raise
    assert "ValueError" in d.status.value and "unlucky" in d.status.value
    assert d.errors == 1 and d.figure_widgets["line"] is fw and len(fw.data[0].x) == 5  # previous figure kept
    d.controls["n"].value = 6
    assert "Ran with" in d.status.value and len(_replaced(d, "line", fw).data[0].x) == 6


def test_an_interrupt_is_shown_and_raised_on():
    """the status says so, and the Ctrl-C reaches the kernel (the reader asked it to stop)."""
    d, _ = make()
    with pytest.raises(KeyboardInterrupt):
        d.controls["n"].value = 0
    assert "KeyboardInterrupt" in d.status.value and d.errors == 1
    assert "Running" not in d.status.value and not d._busy


@pytest.mark.parametrize("exc", [SystemExit(3), GeneratorExit(), RuntimeError("plain")])
def test_any_exception_from_an_experiment_ends_the_run_with_its_status_shown(exc):
    """SystemExit or GeneratorExit escaped the slider handler; the status stayed Running."""
    def experiment(*, n: int):
        if n == 3:
            raise exc
        return {"x": [0, 1], "y": [0, n]}

    d = Dashboard(experiment, {"n": int_slider("n", 2, 1, 5)}, {"line": line}, mode="figurewidget")
    d.controls["n"].value = 3  # not raised into the kernel loop
    assert type(exc).__name__ in d.status.value and "Running" not in d.status.value
    assert d.errors == 1 and not d._busy
    d.controls["n"].value = 4
    assert "Ran with" in d.status.value


def test_a_failing_figure_function_is_shown():
    def broken(r):
        raise RuntimeError("cannot draw")

    d = Dashboard(Recorder(), {"n": int_slider("n", 5, 1, 50)}, {"bad": broken}, mode="figurewidget")
    assert "RuntimeError" in d.status.value and "cannot draw" in d.status.value
    assert d.result is None


def test_guard_refuses_keeps_the_figure_and_reverts_the_control():
    guard = lambda v: f"n={v['n']} is too big" if v["n"] > 20 else None  # noqa: E731
    d, exp = make(guard=guard)
    fw = d.figure_widgets["line"]
    d.controls["n"].value = 40
    assert len(exp.calls) == 1  # nothing ran
    assert "Refused" in d.status.value and "too big" in d.status.value
    assert d.controls["n"].value == 5 and d.figure_widgets["line"] is fw and len(fw.data[0].x) == 5
    d.controls["n"].value = 9
    assert len(exp.calls) == 2 and len(_replaced(d, "line", fw).data[0].x) == 9


def test_a_guard_that_raises_refuses_with_its_reason():
    def guard(values):
        raise ValueError("cannot estimate")

    d = Dashboard(Recorder(), {"n": int_slider("n", 5, 1, 50)}, {"line": line}, guard=guard, mode="figurewidget")
    assert d.runs == 0 and "cannot estimate" in d.status.value


def test_run_button_waits_for_a_click():
    d, exp = make(run_button=True, autorun=False)
    assert exp.calls == [] and "Run" in d.status.value
    d.controls["n"].value = 7
    assert exp.calls == [] and d.stale
    d.button.click()
    assert exp.calls[-1]["n"] == 7 and not d.stale
    assert len(d.figure_widgets["line"].data[0].x) == 7


def test_output_mode_redraws_a_plain_figure():
    d, exp = make(mode="output")
    import ipywidgets

    out = d.figure_widgets["line"]
    assert isinstance(out, ipywidgets.Output)
    first = d.figures["line"]
    d.controls["n"].value = 11
    assert d.figure_widgets["line"] is out
    assert d.figures["line"] is not first and isinstance(d.figures["line"], go.Figure)
    assert list(d.figures["line"].data[0].x) == list(range(11))
    assert d.views["line"].updates == 2


def test_figures_default_to_result_figures_and_new_names_get_views():
    class Result:
        def __init__(self, n):
            self.n = n

        def figures(self):
            figs = {"a": go.Figure(go.Scatter(y=list(range(self.n))))}
            if self.n > 5:
                figs["b"] = go.Figure(go.Bar(y=[self.n]))
            return figs

    d = Dashboard(lambda *, n: Result(n), {"n": log_slider("n", 4, 2, 64)}, mode="figurewidget")
    assert list(d.figure_widgets) == ["a"]
    a = d.figure_widgets["a"]
    d.controls["n"].value = 16
    assert list(d.figure_widgets) == ["a", "b"]
    a = _replaced(d, "a", a)
    assert len(a.data[0].y) == 16 and list(d.figure_widgets["b"].data[0].y) == [16]
    assert len(d._figure_box.children) == 2


def test_bad_arguments_fail_at_construction():
    with pytest.raises(TypeError, match="callable"):
        Dashboard(42, {})
    with pytest.raises(TypeError, match="ipywidgets control"):
        Dashboard(Recorder(), {"n": 5})
    with pytest.raises(ValueError, match="identifier"):
        Dashboard(Recorder(), {"not a name": int_slider("n", 1, 1, 2)})
    with pytest.raises(ValueError, match="fixed"):
        Dashboard(Recorder(), {"n": int_slider("n", 1, 1, 2)}, fixed={"n": 3})
    with pytest.raises(ValueError, match="mode"):
        Dashboard(Recorder(), {"n": int_slider("n", 1, 1, 2)}, mode="plot")
    with pytest.raises(TypeError, match="not callable"):
        Dashboard(Recorder(), {"n": int_slider("n", 1, 1, 2)}, {"x": 3})


def test_displays_as_one_widget():
    import ipywidgets

    d, _ = make()
    assert isinstance(d.widget, ipywidgets.VBox)
    assert "Dashboard" in repr(d)


def test_view_controls_redraw_without_rerunning():
    exp = Recorder()

    def window(r, *, last):
        return go.Figure(go.Scatter(x=r["x"][-last:], y=r["y"][-last:]))

    d = Dashboard(exp, {"n": int_slider("n", 10, 1, 50)}, {"w": window},
                  view_controls={"last": int_slider("last", 3, 1, 50)}, mode="figurewidget",
                  describe=lambda r: f"{len(r['x'])} points")
    fw = d.figure_widgets["w"]
    assert list(fw.data[0].x) == [7, 8, 9] and "10 points" in d.status.value
    d.view_controls["last"].value = 5
    assert len(exp.calls) == 1 and d.redraws == 1  # no rerun
    fw = _replaced(d, "w", fw)
    assert list(fw.data[0].x) == [5, 6, 7, 8, 9]
    d.controls["n"].value = 20
    fw = _replaced(d, "w", fw)
    assert len(exp.calls) == 2 and list(fw.data[0].x) == [15, 16, 17, 18, 19]
    with pytest.raises(ValueError, match="view controls"):
        Dashboard(exp, {"n": int_slider("n", 1, 1, 2)}, view_controls={"n": int_slider("n", 1, 1, 2)})


def _failing_view(exc: BaseException) -> Dashboard:
    """A dashboard whose view control's value 4 makes the figure function raise ``exc``."""
    def window(r, *, last):
        if last == 4:
            raise exc
        return go.Figure(go.Scatter(x=r["x"][-last:], y=r["y"][-last:]))

    return Dashboard(Recorder(), {"n": int_slider("n", 10, 1, 50)}, {"w": window},
                     view_controls={"last": int_slider("last", 3, 1, 50)}, mode="figurewidget")


@pytest.mark.parametrize("exc", [SystemExit(3), GeneratorExit(), RuntimeError("plain")])
def test_any_exception_from_a_redraw_is_shown_and_the_next_redraw_works(exc):
    """A view control's redraw caught only Exception: SystemExit skipped the status line."""
    d = _failing_view(exc)
    d.view_controls["last"].value = 4  # not raised into the kernel loop
    assert type(exc).__name__ in d.status.value and d.errors == 1 and not d._busy
    d.view_controls["last"].value = 5
    assert "Redrawn" in d.status.value and list(d.figure_widgets["w"].data[0].x) == [5, 6, 7, 8, 9]


def test_a_ctrl_c_in_a_redraw_is_shown_then_raised():
    d = _failing_view(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        d.view_controls["last"].value = 4
    assert "KeyboardInterrupt" in d.status.value and not d._busy


def test_animations_are_redrawn_in_an_output_view():
    import ipywidgets

    def animated(r):
        fig = go.Figure(go.Scatter(x=r["x"], y=r["y"]))
        fig.frames = [go.Frame(data=[go.Scatter(x=r["x"][:i + 1], y=r["y"][:i + 1])]) for i in range(len(r["x"]))]
        return fig

    d = Dashboard(Recorder(), {"n": int_slider("n", 5, 1, 50)}, {"line": line, "anim": animated}, mode="figurewidget")
    assert isinstance(d.figure_widgets["anim"], ipywidgets.Output)
    assert not isinstance(d.figure_widgets["line"], ipywidgets.Output)
    out = d.figure_widgets["anim"]
    d.controls["n"].value = 7
    assert d.figure_widgets["anim"] is out and len(d.figures["anim"].frames) == 7


@pytest.mark.parametrize("kwargs, name", [({"controls": float("inf")}, "controls"), ({"controls": {}, "autorun": "yes"}, "autorun"),
                                          ({"controls": {}, "run_button": 1}, "run_button"),
                                          ({"controls": {}, "fixed": [1]}, "fixed"),
                                          ({"controls": {}, "view_controls": 3}, "view_controls")])
def test_bad_arguments_name_themselves_before_anything_runs(kwargs, name):
    calls = []

    def experiment(**kw):
        calls.append(kw)
        return {"x": [0], "y": [0]}

    with pytest.raises(TypeError, match=name):
        Dashboard(experiment, figures={"line": line}, **kwargs)
    assert calls == []  # refused before a run started (an autorun="yes" used to start one)
