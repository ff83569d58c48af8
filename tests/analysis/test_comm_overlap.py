"""comm_overlap and its interval helpers, on synthetic traces with exact answers (no processes)."""

from __future__ import annotations

import numpy as np
import pytest

from d2l_async.analysis import RankComm, comm_overlap, is_backward_name
from d2l_async.trace import Event, Lane, LaneRole, Trace, merge_ranks


def test_backward_names_exclude_accumulate_grad():
    names = np.array(["autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0",
                      "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "aten::mm"], dtype=object)
    assert is_backward_name(names).tolist() == [True, True, False, False]
    assert is_backward_name(names, accumulate=True).tolist() == [True, True, True, False]


def _rank_trace(backward: list[tuple[float, float]], comm: list[tuple[float, float]],
                accumulate: tuple[tuple[float, float], ...] = ()) -> Trace:
    lanes = [Lane("thread 1 (python)", LaneRole.FRONTEND), Lane("thread 2 (pt_gloo_runloop)", LaneRole.BACKEND, "cpu")]
    events = [Event("thread 1 (python)", "op", "autograd::engine::evaluate_function: AddmmBackward0", s, e)
              for s, e in backward]
    events += [Event("thread 1 (python)", "op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                     s, e) for s, e in accumulate]  # part of the backward pass, but hides nothing
    events += [Event("thread 2 (pt_gloo_runloop)", "op", "gloo:all_reduce", s, e, device="cpu") for s, e in comm]
    return Trace.from_events(events, lanes, {"source": "chrome"})


def test_comm_overlap_per_rank_exact():
    # comm 1 overlaps gradient compute (hidden 1 + 1 = 2 of 5 s); comm 2 overlaps only AccumulateGrad:
    # it ran during the backward pass, hidden behind nothing
    bucketed = _rank_trace([(0, 4), (5, 9)], [(3, 6), (10, 12)], accumulate=((9.5, 10.5),))
    after = _rank_trace([(0, 4), (5, 9)], [(9, 10), (11, 12)], accumulate=((4, 5),))  # after backward: no overlap
    merged = merge_ranks({0: bucketed, 1: after})
    c0, c1 = comm_overlap(merged)
    assert c0 == RankComm(rank=0, collectives=2, overlapping=2, comm_s=5.0, hidden_s=2.0, backward_s=8.0)
    assert c0.exposed_s == 3.0 and c0.hidden_fraction == pytest.approx(0.4)
    assert (c1.rank, c1.collectives, c1.overlapping, c1.hidden_s, c1.exposed_s) == (1, 2, 0, 0.0, 2.0)


def test_comm_overlap_without_communication_and_bad_input():
    c, = comm_overlap(merge_ranks({0: _rank_trace([(0, 1)], [])}))
    assert (c.collectives, c.comm_s, c.hidden_fraction) == (0, 0.0, 0.0)
    with pytest.raises(TypeError, match="expects a Trace"):
        comm_overlap("rank0.json")
