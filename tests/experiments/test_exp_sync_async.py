from __future__ import annotations

import pytest

from d2l_async.experiments import CostModel, run_sync_async, sweep_sync_async
from d2l_async.trace import BACKEND_KINDS


@pytest.fixture(scope="module")
def result():
    return run_sync_async(ops=300, numel=1, repeat=1, backend="engine")


def test_sync_run_finishes_each_op_before_the_next_push(result):
    t = result.trace_sync
    work = t.where(kind=BACKEND_KINDS)
    assert len(work) == len(t.where(kind="launch")) == 300
    order = work["issue"].argsort()
    issue, end = work["issue"][order], work["end"][order]
    assert (end[:-1] <= issue[1:]).all(), "a synchronous run pushed an op before the previous one finished"
    # the engine records a block only when the value was not ready yet: at most one per op
    reasons = list(t.where(kind="block")["reason"])
    assert 0 < reasons.count("wait_to_read") <= 300 and set(reasons) == {"wait_to_read"}


def test_async_run_pushes_everything_then_waits_once(result):
    t = result.trace_async
    assert len(t.where(kind="launch")) == len(t.where(kind=BACKEND_KINDS)) == 300
    blocks = t.where(kind="block")
    assert list(blocks["reason"]) == ["waitall"]


def test_eager_context_on_the_cpu(result):
    assert result.eager is not None and len(result.eager.raw) == 1
    assert "eager" in result.eager.label and "GPU" not in result.eager.device


def test_async_is_faster_for_tiny_ops(result):
    assert result.ratio > 1.2


def test_cost_model(result):
    m = result.model
    assert m.n == 300 and min(m.t1, m.t2, m.t3) >= 0
    assert m.sync == pytest.approx(result.sync.median, rel=0.05) or m.t3 == 0  # fits by construction
    assert m.async_book == pytest.approx(m.t1 + 300 * m.t2 + m.t3)
    assert m.async_pipeline >= m.async_book - 1e-12
    assert m.bottleneck in ("frontend", "backend")
    assert m.t2_source in ("backend pace", "op duration") and "t2 =" in m.method
    # the trace agrees with the bottleneck: a backend-bound run shows the queue filling
    from d2l_async import analysis

    queue = int(analysis.queue_length_summary(result.trace_async)["max"].max())
    if m.bottleneck == "backend" and m.t2_source == "backend pace":
        assert queue >= 10


def test_cost_model_algebra():
    m = CostModel(n=10, t1=1.0, t2=3.0, t3=0.5)
    assert m.sync == 45.0 and m.async_book == 31.5 and m.async_pipeline == 31.5 and m.bottleneck == "backend"
    m = CostModel(n=10, t1=3.0, t2=1.0, t3=0.5)
    assert m.async_pipeline == 31.5 and m.async_book == 13.5 and m.bottleneck == "frontend"


def test_sweep_grid_and_lookup():
    sw = sweep_sync_async(ops=(50, 100), numels=(1, 1000), backend="engine")
    assert [(p.numel, p.ops) for p in sw.points] == [(1, 50), (1, 100), (1000, 50), (1000, 100)]
    assert [o for o, _ in sw.ratios(numel=1000)] == [50, 100]
    with pytest.raises(ValueError, match="swept"):
        sw.ratios(numel=7)


@pytest.mark.parametrize("kwargs", [{"ops": 0}, {"numel": 0}, {"repeat": 0}, {"ops": 10, "trace_ops": 11},
                                    {"backend": "fpga"}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        run_sync_async(**kwargs)


def test_bad_sweep():
    with pytest.raises(ValueError):
        sweep_sync_async(ops=())
    with pytest.raises(ValueError):
        sweep_sync_async(numels=(0,))


# -- t2 is the backend's pace while backlogged (pure, synthetic traces) --------------------------------
def _trace(n, *, issue_every, start_every, duration, first_start=None):
    """``n`` ops issued every ``issue_every`` s on the frontend, run back to back on one worker lane."""
    from d2l_async.trace import Event, Lane, LaneRole, Trace

    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", virtual=True, stream=0)]
    events, t = [], first_start if first_start is not None else 0.0
    for i in range(n):
        issue = i * issue_every
        t = max(t, issue)  # an op cannot start before it was issued
        events.append(Event("frontend", "launch", "push", issue, issue + issue_every / 2))
        events.append(Event("cpu:0 worker 0", "op", "add", t, t + duration, issue=issue, device="cpu:0"))
        t += start_every
    return Trace.from_events(events, lanes, {"virtual": True})


def test_t2_is_the_start_to_start_interval_while_backlogged():
    from d2l_async.experiments.sync_async import backend_pace

    # issued every 1 µs, run every 10 µs, each add lasting 3 µs: 7 µs of bookkeeping per op
    t2, source = backend_pace(_trace(50, issue_every=1e-6, start_every=10e-6, duration=3e-6))
    assert source == "backend pace"
    assert t2 == pytest.approx(10e-6, rel=1e-6)


def test_t2_falls_back_to_op_duration_when_the_backend_is_never_behind():
    from d2l_async.experiments.sync_async import MIN_BACKLOGGED_PAIRS, backend_pace

    # issued every 20 µs, each op done in 3 µs: the backend idles, its pace is not observable
    trace = _trace(50, issue_every=20e-6, start_every=0.0, duration=3e-6)
    t2, source = backend_pace(trace)
    assert source == "op duration" and t2 == pytest.approx(3e-6, rel=1e-6)
    # just under the threshold of backlogged pairs still falls back; at it, the pace is used
    few = _trace(MIN_BACKLOGGED_PAIRS, issue_every=1e-6, start_every=10e-6, duration=3e-6)  # n-1 pairs
    assert backend_pace(few)[1] == "op duration"
    enough = _trace(MIN_BACKLOGGED_PAIRS + 1, issue_every=1e-6, start_every=10e-6, duration=3e-6)
    assert backend_pace(enough) == (pytest.approx(10e-6, rel=1e-6), "backend pace")


def test_only_backlogged_pairs_count():
    from d2l_async.experiments.sync_async import backend_pace
    from d2l_async.trace import Event, Trace

    busy = list(_trace(30, issue_every=1e-6, start_every=10e-6, duration=3e-6).events())
    # then 30 more ops, each issued long after the previous ended: idle gaps of ~1 ms must not count
    t0 = max(e.end for e in busy) + 1e-3
    idle = [Event("cpu:0 worker 0", "op", "add", t0 + i * 1e-3, t0 + i * 1e-3 + 3e-6, issue=t0 + i * 1e-3,
                  device="cpu:0") for i in range(30)]
    trace = Trace.from_events([*busy, *idle], list(_trace(1, issue_every=1, start_every=1, duration=1).lanes))
    assert backend_pace(trace) == (pytest.approx(10e-6, rel=1e-6), "backend pace")


def test_backlogged_model_reports_backend_where_op_duration_said_frontend():
    from d2l_async.experiments.sync_async import backend_pace

    # the frontend issues every 5 µs; an add lasts 3 µs but the backend starts one only every 8 µs
    trace = _trace(200, issue_every=5e-6, start_every=8e-6, duration=3e-6)
    t2, source = backend_pace(trace)
    model = CostModel(n=200, t1=5e-6, t2=t2, t3=1e-6, t2_source=source)
    assert model.bottleneck == "backend" and source == "backend pace"
    assert model.async_book == pytest.approx(5e-6 + 200 * 8e-6 + 1e-6)
    assert CostModel(n=200, t1=5e-6, t2=3e-6, t3=1e-6, t2_source="op duration").bottleneck == "frontend"


def test_backend_pace_rejects_non_traces_and_handles_empty():
    from d2l_async.experiments.sync_async import backend_pace
    from d2l_async.trace import Lane, LaneRole, Trace

    with pytest.raises(TypeError, match="Trace"):
        backend_pace([1, 2, 3])
    assert backend_pace(Trace.from_events([], [Lane("frontend", LaneRole.FRONTEND)])) == (0.0, "op duration")
    with pytest.raises(ValueError, match="t2_source"):
        CostModel(n=1, t1=0.0, t2=0.0, t3=0.0, t2_source="guess")


def test_method_names_the_t2_used():
    pace = CostModel(n=1, t1=0.0, t2=0.0, t3=0.0, t2_source="backend pace")
    dur = CostModel(n=1, t1=0.0, t2=0.0, t3=0.0, t2_source="op duration")
    assert "backlogged" in pace.method and "fallback" not in pace.method
    assert "fallback" in dur.method and "duration" in dur.method


def test_a_backlogged_engine_run_reports_backend():
    """Large ops: the backend cannot keep up, the queue fills, and the model says so."""
    from d2l_async import analysis

    # three runs, as outside quick mode: t1 is their median issue time, so one run whose frontend was
    # descheduled 4 ms (beside two busy processes: t1 29 µs against a 16 µs pace) does not decide the model
    r = run_sync_async(ops=150, numel=100_000, repeat=3, backend="engine")
    queue = int(analysis.queue_length_summary(r.trace_async)["max"].max())
    assert queue > 150 // 2, f"expected the queue to fill, longest was {queue}"
    assert r.model.t2_source == "backend pace" and r.model.bottleneck == "backend", r.model
    # the pace includes the op itself, so it is at least the median op duration
    work = r.trace_async.where(kind=BACKEND_KINDS)
    durations = sorted((work["end"] - work["start"]).tolist())
    assert r.model.t2 >= durations[len(durations) // 2] * 0.999
