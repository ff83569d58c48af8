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
    assert "t2 =" in CostModel.method


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
