"""Default titles fit a notebook FigureWidget (~650 px): a short first line, details said once below."""

from __future__ import annotations

import pytest
from viz_traces import engine_like

from d2l_async import viz

ENGINE_DEVICE = "virtual devices cpu:0: threads on this CPU, 1 worker(s) each"
FIGURES = {"timeline": viz.plot_timeline, "trace": viz.plot_trace, "queue": viz.plot_queue_length,
           "blocked": viz.plot_blocked_time, "animated": viz.animate_timeline}


@pytest.mark.parametrize("name", sorted(FIGURES))
@pytest.mark.parametrize("device", [ENGINE_DEVICE, "this laptop", ""])
def test_default_title_is_short_and_says_virtual_once(name, device):
    trace = engine_like(20).with_meta(device=device)
    fig = FIGURES[name](trace)
    text = fig.layout.title.text
    head, br, details = text.partition("<br>")
    assert len(head) <= 60, head
    assert f"{len(trace):,} events" in head  # the event count stays on the first line
    assert br and details.startswith("<sup>") and details.endswith("</sup>")
    assert text.lower().count("virtual") == 1, text  # said once, even when the device says it
    if device:
        assert device in details
    assert fig.layout.margin.t >= 90  # room for the second line


def test_no_second_line_without_details():
    trace = engine_like(3).with_meta(source="", virtual=False)
    trace = type(trace)(tuple(l.__class__(l.name, l.role, l.device, False, l.stream) for l in trace.lanes),
                        trace.columns, {})
    text = viz.plot_timeline(trace).layout.title.text
    assert "<br>" not in text and text.startswith("Frontend and backend timeline")


def test_given_titles_are_kept():
    assert viz.plot_trace(engine_like(3), title="mine").layout.title.text == "mine"


def test_block_label_names_the_notebook_cell():
    from d2l_async.viz.style import block_label

    assert block_label("item", "In[4]:3: x.item()") == "x.item() — In[4] line 3"
    assert block_label("print", "train.py:11: print(z)  # a blocker") == "print(z) — line 11"
