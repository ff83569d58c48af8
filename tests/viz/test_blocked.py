from __future__ import annotations

import pytest
from viz_traces import engine_like

from d2l_async.trace import Event, Lane, LaneRole, Trace
from d2l_async.viz import plot_blocked_time


def _trace():
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("w", LaneRole.BACKEND, virtual=True)]
    ev = [Event("frontend", "block", "wait", 0.0, 0.002, reason="print", source="line 3: print(z)"),
          Event("frontend", "block", "wait", 0.003, 0.004, reason="print", source="line 3: print(z)"),
          Event("frontend", "block", "wait", 0.005, 0.010, reason="waitall", source="line 9: eng.waitall()"),
          Event("w", "op", "mul", 0.0, 0.01)]
    return Trace.from_events(ev, lanes=lanes)


def test_one_bar_per_cause_longest_on_top():
    fig = plot_blocked_time(_trace())
    (bar,) = fig.data
    # plotly draws the first category at the bottom: the longest cause (waitall, 5 ms) comes last
    assert list(bar.y) == ["print(z) — line 3", "eng.waitall() — line 9"]
    assert list(bar.x) == pytest.approx([3.0, 5.0])  # ms
    assert list(bar.customdata) == [2, 1]


def test_group_by_reason_uses_the_analysis():
    (bar,) = plot_blocked_time(_trace(), by="reason").data
    assert list(bar.y) == ["print", "waitall"]


def test_no_blocks_and_bad_input(empty_trace):
    fig = plot_blocked_time(engine_like(2, block=False))
    assert any("never blocked" in a.text for a in fig.layout.annotations)
    assert any("no events" in a.text for a in plot_blocked_time(empty_trace).layout.annotations)
    with pytest.raises(ValueError, match="by="):
        plot_blocked_time(_trace(), by="colour")
    with pytest.raises(TypeError, match="Trace"):
        plot_blocked_time(None)


def test_a_gpu_trace_file_shows_its_copies_into_pageable_memory_as_the_longest_wait():
    """The shipped A100 step waited 758 ms in 30 cudaMemcpyAsync calls into pageable memory, more than in
    its 76 synchronizes (161 ms); the reader filed them as launches before."""
    from d2l_async.data import load_sample
    from d2l_async.trace import BLOCKING_COPY_REASON

    (bar,) = plot_blocked_time(load_sample("a100_training_step")).data
    assert list(bar.y) == ["cudaStreamSynchronize", "cudaDeviceSynchronize", BLOCKING_COPY_REASON]
    assert list(bar.customdata) == [75, 1, 30]
    assert list(bar.x) == pytest.approx([2.8, 158.2, 758.4], abs=0.05)  # ms
    assert bar.text[-1] == "758 ms (30×)"
