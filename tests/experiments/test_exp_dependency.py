from __future__ import annotations

import numpy as np
import pytest

from d2l_async.experiments import EXPRESSIONS, check_expression, run_expression, run_independent_vs_dependent
from d2l_async.trace import BACKEND_KINDS


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_every_dropdown_expression_matches_eager_torch(expr):
    r = run_expression(expr, size=3, workers=2)
    assert r.matches, (expr, r.value, r.expected)
    assert r.virtual and r.workers == 2


def test_book_expression_trace():
    r = run_expression("x * y + 2")
    work = r.trace.where(kind=BACKEND_KINDS)
    assert sorted(work["name"]) == ["add", "mul"]
    blocks = r.trace.where(kind="block")
    assert list(blocks["reason"]) == ["asnumpy"]  # the frontend waited once, to read z
    np.testing.assert_allclose(r.value, r.expected)


@pytest.mark.parametrize("bad", [
    "__import__('os').system('true')", "x.shape", "x if y else w", "open('f')", "x < y", "lambda: x",
    "x[0]", "", "   ", "a + b", "exp(x, y)", "exp(x=1)", "x +", "True + x", "'s' * x", "x // y", "x % y",
])
def test_evaluator_rejects_everything_else(bad):
    with pytest.raises(ValueError):
        check_expression(bad)


def test_expression_without_arrays_and_function_names():
    with pytest.raises(ValueError, match="does not use any array"):
        run_expression("2 + 3")
    with pytest.raises(ValueError, match="call it"):
        run_expression("exp + x")
    with pytest.raises(ValueError, match="workers"):
        run_expression("x + y", workers=0)


def _ops(trace):
    w = trace.where(kind=BACKEND_KINDS)
    order = np.argsort(w["start"])
    return w["start"][order], w["end"][order], w["lane"][order]


@pytest.fixture(scope="module")
def chains():
    return run_independent_vs_dependent(workers=(1, 2), ops=6, chains=2, size=400, repeat=1)


def test_dependent_chain_runs_one_op_at_a_time(chains):
    for r in chains:
        start, end, _ = _ops(r.trace_dependent)
        assert len(start) == r.ops
        assert np.all(start[1:] >= end[:-1]), "an op of a dependent chain started before its input was done"


def test_independent_chains_use_both_workers(chains):
    from d2l_async.analysis import overlap

    one, two = chains
    assert len(set(_ops(one.trace_independent)[2])) == 1

    def both(r) -> float:
        lanes = sorted(set(_ops(r.trace_independent)[2]))
        return overlap(r.trace_independent, *lanes).both if len(lanes) == 2 else 0.0

    # the two chains really ran at once; on a shared 2-core machine the OS may, rarely, keep one
    # worker off the CPU for a whole run, so up to three runs may be tried
    tries = [two]
    while both(tries[-1]) == 0 and len(tries) < 3:
        tries.append(run_independent_vs_dependent(workers=(2,), ops=6, chains=2, size=400, repeat=1)[0])
    assert both(tries[-1]) > 0


def test_independence_validation():
    with pytest.raises(ValueError, match="at least chains"):
        run_independent_vs_dependent(ops=1, chains=2)
    with pytest.raises(ValueError, match="workers"):
        run_independent_vs_dependent(workers=())


def test_worker_counts_are_timed_in_rounds(monkeypatch):
    """Every round times each worker count once (1, 2, 1, 2, ...), so a change in the machine's load
    during the runs falls on both counts alike; every round's time is a sample of the medians."""
    from d2l_async.experiments import dependency

    order: list[int] = []
    real = dependency._chain_run

    def recording(eng, m, starts, length):
        order.append(eng.workers)
        return real(eng, m, starts, length)

    monkeypatch.setattr(dependency, "_chain_run", recording)
    one, two = run_independent_vs_dependent(workers=(1, 2), ops=4, size=16, repeat=3)
    # a warm-up each, then per round: independent and dependent on 1 worker, then on 2
    assert order == [1, 2] + [1, 1, 2, 2] * 3
    assert len(one.independent_runs) == len(two.independent_runs) == 3
    assert len(one.dependent_runs) == len(two.dependent_runs) == 3
