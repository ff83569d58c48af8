"""The figure rules can fail: a long title, overlapping labels, a multi-role timeline without legend."""

from __future__ import annotations

import plotly.graph_objects as go

from d2l_async import viz
from d2l_async.viz._common import fit_title

from figure_rules import missing_legend, overlapping_labels, problems, title_overflow

LONG = ("CPU profile of a training step: every op ran on the Python thread, no backend queue, "
        "recorded with torch.profiler on 1 usable CPU, load average 3.5, quick mode, 336 events, 3 steps")


def test_an_unwrapped_long_title_overflows_and_a_wrapped_one_fits():
    raw = go.Figure(layout={"title": {"text": LONG}})
    assert title_overflow(raw.to_plotly_json())
    assert not title_overflow(fit_title(go.Figure(layout={"title": {"text": LONG}})).to_plotly_json())


def test_overlapping_annotations_are_found():
    fig = go.Figure(go.Scatter(x=[0, 10], y=[0, 1]))
    fig.add_annotation(x=5, y=0.5, text="waited 12.3 ms at print(z)", showarrow=False)
    fig.add_annotation(x=5.1, y=0.5, text="waited 11.0 ms at z.item()", showarrow=False)
    assert overlapping_labels(fig.to_plotly_json())
    apart = go.Figure(go.Scatter(x=[0, 10], y=[0, 1]))
    apart.add_annotation(x=1, y=0.5, text="a", showarrow=False)
    apart.add_annotation(x=9, y=0.5, text="b", showarrow=False)
    assert not overlapping_labels(apart.to_plotly_json())


def test_scatter_text_labels_that_collide_are_found():
    fig = go.Figure(go.Scatter(x=[0, 0.05, 5], y=[0, 0, 0], mode="markers+text",
                               text=["sum gW20@cpu:1", "W1@cpu:1 (v2)", "far"]))
    assert len(overlapping_labels(fig.to_plotly_json())) == 1


def test_a_multi_role_timeline_without_legend_is_found():
    fig = go.Figure([go.Bar(orientation="h", x=[1], y=[0], name="backward"),
                     go.Bar(orientation="h", x=[1], y=[1], name="all-reduce")])
    assert not missing_legend(fig.to_plotly_json())
    fig.update_layout(showlegend=False)
    assert missing_legend(fig.to_plotly_json())
    assert problems(fig)  # the bundle reports it too


# -- each new rule fails on the figure the notebooks drew on main, and holds on today's drawing ----------
import json  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

import figure_rules as rules  # noqa: E402
from d2l_async.trace import Event, Lane, LaneRole, Trace, merge_ranks  # noqa: E402

MAIN = Path(__file__).parent / "main_figures"


def main_figure(name: str) -> dict:
    """A figure as a notebook drew it before these rules (tests/viz/main_figures/)."""
    return rules.as_json(json.loads((MAIN / f"{name}.json").read_text()))


def blockers_trace(n: int = 5, gap: float = 1.0e-3) -> Trace:
    """04's cell: ``b = a @ a; <blocker>`` five times, each product ~1 ms, the waits ~80 px apart."""
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", True, 0)]
    calls = ["print(b.sum())", "b.sum().item()", "b.asnumpy()", "float(b.sum())", "if b.sum():"]
    reasons = ["print", "item", "asnumpy", "item", "bool"]
    ev, t = [], 0.0
    for i in range(n):
        ev.append(Event("frontend", "launch", "push matmul", t, t + 5e-6, source=f"In[3]:{7 + i}: b = a @ a; {calls[i]}"))
        ev.append(Event("cpu:0 worker 0", "op", "matmul", t + 1e-5, t + gap, issue=t, device="cpu:0"))
        ev.append(Event("frontend", "block", "wait", t + 2e-5, t + gap, reason=reasons[i],
                        source=f"In[3]:{7 + i}: b = a @ a; {calls[i]}"))
        t += gap * 1.15
    return Trace.from_events(ev, lanes=lanes, meta={"source": "engine", "virtual": True})


def test_a_median_beside_the_next_box_is_found_and_one_above_its_own_is_not():
    assert len(rules.labels_far_from_their_marks(main_figure("04_blockers-2"))) == 6
    assert rules.labels_far_from_their_marks(main_figure("01_asynchrony-1"))
    runs = {k: [v, v * 1.1, v * 0.9] for k, v in
            {"no blocker": 1e-5, "print": 2.9e-4, "item": 4.5e-5, "asnumpy": 3.7e-5, "numpy": 3.6e-5,
             "float": 6e-5, "bool": 4.4e-5}.items()}
    assert not rules.labels_far_from_their_marks(rules.as_json(viz.plot_measurements(runs)))


def test_waits_left_unnamed_are_found_and_every_wait_is_named_now():
    found = rules.unnamed_shaded_blocks(main_figure("04_blockers-1"))
    assert len(found) == 4  # 1 of 5 named on main in quick mode
    fig = viz.plot_timeline(blockers_trace())
    assert not rules.unnamed_shaded_blocks(rules.as_json(fig))
    anim = viz.animate_timeline(blockers_trace())
    assert not rules.unnamed_shaded_blocks(rules.as_json(anim))


def test_backward_and_memset_in_one_colour_are_found_and_the_v100_step_now_has_one_per_role():
    found = rules.colour_shared_by_roles(main_figure("06_queue_memory-2"))
    assert found == ["#cc79a7 is the colour of 'backward', 'memset' (areas)"]
    from d2l_async.data import load_sample

    fig = viz.plot_trace(load_sample("v100_training_step"))
    assert not rules.colour_shared_by_roles(rules.as_json(fig))


def _profile(names: list[str]) -> Trace:
    lanes = [Lane("thread 1 (python)", LaneRole.FRONTEND), Lane("link (modelled)", LaneRole.BACKEND, "link")]
    ev = [Event("thread 1 (python)" if "all-reduce" not in n else "link (modelled)", "op", n, i * 1e-3, i * 1e-3 + 8e-4)
          for i, n in enumerate(names)]
    return Trace.from_events(ev, lanes=lanes, meta={"source": "chrome"})


def test_roles_that_misname_their_bars_are_found_and_drawn_right_now():
    assert rules.roles_that_misname_their_bars(main_figure("09_profiling-1")) == [
        "the all-reduce role holds bars that are no collective: ['aten::broadcast_tensors']"]
    assert "forward / other" in rules.roles_that_misname_their_bars(main_figure("10_async_communication-6"))[0]
    fig = viz.plot_timeline(_profile(["aten::broadcast_tensors", "aten::mse_loss", "MseLossBackward0",
                                      "all-reduce bucket 1 (1.0 MB)", "c10d::allreduce_"]))
    assert not rules.roles_that_misname_their_bars(rules.as_json(fig))
    roles = {tr.name for tr in fig.data if tr.type == "bar"}
    assert roles == {"forward / other", "backward", "all-reduce"}


@dataclass
class _Straggler:
    """What plot_comm_overlap reads of run_straggler's result, with a known trace."""

    traces: dict
    delay_s: dict = field(default_factory=lambda: {"even": 0.0, "straggler": 0.05})
    slow_rank: int = 1

    def rows(self):
        out = []
        for setting, comm in (("even", {0: 0.012, 1: 0.010}), ("straggler", {0: 0.060, 1: 0.006})):
            for rank, c in comm.items():
                out.append({"setting": setting, "rank": rank, "hidden_s": c / 4, "exposed_s": c * 3 / 4,
                            "step_s": {"even": 0.024, "straggler": 0.069}[setting]})
        return out


def _gloo_rank(comm: list[tuple[float, float]]) -> Trace:
    lanes = [Lane("thread 1 (python)", LaneRole.FRONTEND), Lane("thread 2 (pt_gloo_runloop)", LaneRole.BACKEND, "cpu")]
    ev = [Event("thread 2 (pt_gloo_runloop)", "op", "gloo:all_reduce", s, e, device="cpu") for s, e in comm]
    return Trace.from_events(ev, lanes=lanes, meta={"source": "chrome"})


def straggler_result() -> _Straggler:
    # straggler: rank 0 enters at 9 ms, rank 1 (sleeping) at 58.5 ms: rank 0 waited 49.5 ms
    even = merge_ranks({0: _gloo_rank([(0.010, 0.020)]), 1: _gloo_rank([(0.011, 0.020)])})
    slow = merge_ranks({0: _gloo_rank([(0.009, 0.0595), (0.0595, 0.066)]), 1: _gloo_rank([(0.0585, 0.066)])})
    return _Straggler({"even": even, "straggler": slow})


def test_join_wait_is_the_communication_before_the_last_rank_joined():
    r = straggler_result()
    assert viz.join_wait(r.traces["straggler"]) == pytest.approx({0: 0.0495, 1: 0.0})
    assert viz.join_wait(r.traces["even"]) == pytest.approx({0: 0.001, 1: 0.0})
    assert viz.join_wait(_gloo_rank([(0.0, 1.0)])) == {}


def test_a_constant_subtitle_is_found_and_the_straggler_figure_states_its_measured_wait():
    assert rules.subtitle_without_a_measured_fact(main_figure("10_async_communication-5"))
    fig = viz.plot_comm_overlap(straggler_result(), title="Even ranks vs rank 1 sleeping 50 ms per step")
    assert not rules.subtitle_without_a_measured_fact(rules.as_json(fig))
    sub = fig.layout.title.subtitle.text.replace("<br>", " ")
    assert "rank 1 sleeping 50 ms per step (straggler)" in sub and "rank 0 49.5 ms" in sub
    assert "69 ms straggler vs 24 ms even" in sub
    waiting, rest, step = fig.data
    assert waiting.name == "waiting for rank 1 to join" and list(waiting.y)[2] == pytest.approx(49.5)
    assert list(rest.y)[2] == pytest.approx(60.0 - 49.5)  # the rest of rank 0's 60 ms of communication


def test_time_before_zero_is_found_and_the_graph_slider_starts_at_zero():
    assert rules.time_before_zero(main_figure("02_dependency_graph-1")) == ["the time slider starts at -0.145"]
    assert rules.time_before_zero(main_figure("07_automatic_parallelism-1"))
    fig = viz.plot_dependency_graph(blockers_trace())
    assert not rules.time_before_zero(rules.as_json(fig))
    assert float(fig.layout.sliders[0].steps[0].label) == 0.0


def two_device_trace() -> Trace:
    """07's shape: ops on cpu:1 and cpu:2, arrays named ``X0.0@cpu:1``."""
    lanes = [Lane("frontend", LaneRole.FRONTEND)] + [
        Lane(f"cpu:{d} worker 0", LaneRole.BACKEND, f"cpu:{d}", True, 0) for d in (1, 2)]
    ev = []
    for d in (1, 2):
        t = d * 1e-4
        ev.append(Event(f"cpu:{d} worker 0", "op", "copy", t + 1e-5, t + 2e-5, issue=t, device=f"cpu:{d}",
                        reads=(f"X0.{d}",), writes=(f"X0.{d}@cpu:{d}",)))
        ev.append(Event(f"cpu:{d} worker 0", "op", "forward", t + 3e-5, t + 5e-5, issue=t, device=f"cpu:{d}",
                        reads=(f"X0.{d}@cpu:{d}", f"W1@cpu:{d}"), writes=(f"gW20(cpu:{3 - d})@cpu:{d}",)))
    return Trace.from_events(ev, lanes=lanes, meta={"source": "engine", "virtual": True})


def test_unnamed_lanes_and_cut_names_are_found_and_the_graph_names_both_now():
    main = main_figure("07_automatic_parallelism-1")
    assert len(rules.unnamed_lanes(main)) == 3 and len(rules.cut_names(main)) == 15
    fig = rules.as_json(viz.plot_dependency_graph(two_device_trace()))
    assert not rules.unnamed_lanes(fig) and not rules.cut_names(fig)
    assert not rules.unnamed_shaded_blocks(fig)  # each device's lane is shaded and named
    texts = [t for tr in fig["data"] if tr.get("mode") == "markers+text" for t in tr["text"] if t]
    assert "X0.1" in texts and "gW20(cpu:2)" in texts  # the lane names the device, the array drops it


def test_crowded_tick_labels_are_found_and_the_comm_figure_wraps_them():
    assert rules.crowded_tick_labels(main_figure("10_async_communication-4"))
    rows = [{"setting": s, "rank": r, "hidden_s": 0.001, "exposed_s": 0.01, "step_s": 0.02}
            for s in ("after_backward", "bucketed") for r in (0, 1)]
    assert not rules.crowded_tick_labels(rules.as_json(viz.plot_comm_overlap(rows)))


def test_every_figure_kind_now_carries_a_text_alternative_with_its_measured_fact():
    assert rules.missing_alt_text(main_figure("04_blockers-1"))
    tr = blockers_trace()
    figures = {
        "timeline": viz.plot_timeline(tr), "queue": viz.plot_queue_length(tr), "trace": viz.plot_trace(tr),
        "animated": viz.animate_timeline(tr), "graph": viz.plot_dependency_graph(tr),
        "expression": viz.plot_dependency_graph("z = x * y + 2"), "blocked": viz.plot_blocked_time(tr),
        "measurements": viz.plot_measurements({"a": [0.001, 0.002], "b": [0.003]}),
        "overhead": viz.plot_scheduling_overhead([{"workers": 1, "per_op_us": 5.0}, {"workers": 2, "per_op_us": 6.0}]),
        "comm": viz.plot_comm_overlap(straggler_result()),
        "empty": viz.plot_timeline(Trace.from_events([], lanes=[Lane("frontend", LaneRole.FRONTEND)])),
    }
    for name, fig in figures.items():
        assert not rules.missing_alt_text(rules.as_json(fig)), name
        alt = viz.alt_text(fig)
        assert alt and "<" not in alt, (name, alt)
    # the fact is the figure's own numbers: five waits, the longest named
    assert "in 5 waits" in viz.alt_text(figures["timeline"]) and "print(b.sum())" in viz.alt_text(figures["blocked"])
    assert "Median per run: a 1.5 ms, b 3 ms" in viz.alt_text(figures["measurements"])
    assert viz.alt_text(figures["empty"]).endswith("No events in this trace")
    # the alt text follows a title set afterwards, from the figure's JSON as well
    fig = figures["queue"].update_layout(title_text="Mine<br><sup>details</sup>")
    assert viz.alt_text(fig).startswith("Mine. The queue peaked at")
    assert viz.alt_text(fig.to_plotly_json()) == viz.alt_text(fig)


def test_join_wait_matches_each_collective_with_the_others_over_several_steps():
    # two steps, two buckets each: rank 1 joins each collective 5 ms after rank 0 entered it
    r0 = _gloo_rank([(0.000, 0.010), (0.002, 0.011), (0.100, 0.110), (0.102, 0.111)])
    r1 = _gloo_rank([(0.005, 0.010), (0.007, 0.011), (0.105, 0.110), (0.107, 0.111)])
    waits = viz.join_wait(merge_ranks({0: r0, 1: r1}))
    assert waits == pytest.approx({0: 0.014, 1: 0.0})  # [0, 7 ms) and [100, 107 ms): the union


def test_a_wait_whose_label_is_cut_is_named_by_its_whole_statement():
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", True, 0)]
    ev = [Event("cpu:0 worker 0", "op", "matmul", 0.0, 0.010, issue=0.0, device="cpu:0")]
    for i in range(6):  # six short waits side by side: their 48-character labels cannot all be written
        ev.append(Event("frontend", "block", "wait", 0.0101 + i * 0.0012, 0.0109 + i * 0.0012, reason="waitall",
                        source=f"In[12]:{10 + i}: d2l_async.synchronize_every_queue_of_this_engine()"))
    fig = rules.as_json(viz.plot_timeline(Trace.from_events(ev, lanes=lanes, meta={"source": "engine"})))
    assert not rules.cut_names(fig) and not rules.unnamed_shaded_blocks(fig)
