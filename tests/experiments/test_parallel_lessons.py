"""Lesson checks of notebooks 02 and 07: pure functions of synthetic results, then real modelled runs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from d2l_async.analysis import Overlap
from d2l_async.experiments import parallel_lessons as pl
from d2l_async.experiments import run_independent_vs_dependent, run_mlp_parallel, run_two_devices
from d2l_async.trace import Lane, LaneRole, Trace

IDLE = pl.RunFacts(2.0, 0.1, 0.3, "2 usable CPUs")
BUSY = pl.RunFacts(1.0, 1.0, 2.0, "1 usable CPU")


def _trace(ops, blocks=(), launches=()):
    """ops: (device, start, end) in ms; blocks: (reason, start, end); launches: (start, end)."""
    rows = []
    for i, (dev, s, e) in enumerate(ops):
        rows.append(dict(id=i, lane=f"{dev} worker 0", kind="op", name="matmul", start=s / 1e3, end=e / 1e3,
                         device=dev, reason=""))
    for reason, s, e in blocks:
        rows.append(dict(id=len(rows), lane="frontend", kind="block", name=reason, start=s / 1e3, end=e / 1e3,
                         device="", reason=reason))
    for s, e in launches:
        rows.append(dict(id=len(rows), lane="frontend", kind="launch", name="push", start=s / 1e3, end=e / 1e3,
                         device="", reason=""))
    devs = sorted({d for d, _, _ in ops})
    lanes = [Lane("frontend", LaneRole.FRONTEND)] + [Lane(f"{d} worker 0", LaneRole.BACKEND, device=d, virtual=True)
                                                     for d in devs]
    return Trace.from_columns({k: [r[k] for r in rows] for k in rows[0]}, lanes, {})


SIDE = _trace([("cpu:0", 0, 10), ("cpu:1", 0, 10), ("cpu:0", 10, 20), ("cpu:1", 10, 20)])
APART = _trace([("cpu:0", 0, 10), ("cpu:0", 10, 20), ("cpu:1", 21, 31), ("cpu:1", 31, 41)])
TURNS = _trace([("cpu:0", 0, 10), ("cpu:1", 10, 20), ("cpu:0", 20, 30), ("cpu:1", 30, 40)])


def test_interval_facts():
    assert pl.overlap_seconds(SIDE, "cpu:0", "cpu:1") == pytest.approx(0.020)
    assert pl.overlap_seconds(TURNS, "cpu:0", "cpu:1") == 0
    assert pl.max_concurrency(SIDE) == 2 and pl.max_concurrency(TURNS) == 1
    assert pl.gap_after(APART, "cpu:0", "cpu:1") == pytest.approx(0.001)
    assert pl.gap_after(SIDE, "cpu:0", "cpu:1") < 0


def test_plan_devices_from_spare_cpus():
    assert pl.plan_devices(IDLE).threads
    plan = pl.plan_devices(BUSY)
    assert not plan.threads and "0.0 spare" in plan.reason and "modelled" in plan.reason


def _runs(ms):
    """Three timed runs around a median of ``ms`` (a 2 % spread)."""
    return tuple(ms / 1e3 * f for f in (0.99, 1.0, 1.01))


def _two(conc_ms, ser_ms, tc, ts, facts=IDLE, modelled=None):
    return SimpleNamespace(devices=("cpu:0", "cpu:1"), concurrent_seconds=conc_ms / 1e3, serialized_seconds=ser_ms / 1e3,
                           speedup=ser_ms / conc_ms, trace_concurrent=tc, trace_serialized=ts, facts=facts,
                           modelled=modelled, virtual=True, concurrent_runs=_runs(conc_ms),
                           serialized_runs=_runs(ser_ms))


def test_two_device_checks_hold_and_fail_with_reasons():
    ok = pl.two_device_checks(_two(20, 41, SIDE, APART, modelled={"cpu:0": {"ops": 4, "overruns": 0}}))
    assert [c.holds for c in ok] == [True, True] and "modelled devices" in ok[0].name
    bad = pl.two_device_checks(_two(40, 41, TURNS, APART, facts=BUSY))
    assert not bad[0].holds and bad[0].cause == "no-spare-cpu" and bad[0].explained
    over = pl.two_device_checks(_two(40, 41, TURNS, APART, modelled={
        "cpu:0": {"ops": 4, "overruns": 2, "worst_overrun": 3.0}}))
    assert not over[0].holds and over[0].cause == "no-spare-cpu" and "2 of 4 modelled ops" in over[0].otherwise
    slow_apart = _trace([("cpu:0", 0, 12), ("cpu:0", 12, 24), ("cpu:1", 24, 36), ("cpu:1", 36, 48)])
    above = pl.two_device_checks(_two(20, 48, SIDE, slow_apart))[0]
    assert above.holds and above.number("ratio") == pytest.approx(2.4)
    overlapping = pl.two_device_checks(_two(20, 20, SIDE, SIDE))
    assert not overlapping[1].holds  # a "serialized" run whose devices overlapped


def _row(workers, ind_ms, dep_ms, ti, td, modelled=None, facts=IDLE):
    return SimpleNamespace(workers=workers, independent_seconds=ind_ms / 1e3, dependent_seconds=dep_ms / 1e3,
                           trace_independent=ti, trace_dependent=td, facts=facts, modelled=modelled, virtual=True,
                           independent_runs=_runs(ind_ms), dependent_runs=_runs(dep_ms))


def test_independence_checks():
    chain = _trace([("cpu:0", 0, 10), ("cpu:0", 10, 20), ("cpu:0", 20, 30), ("cpu:0", 30, 40)])
    good = pl.independence_checks([_row(1, 40, 40, chain, chain), _row(2, 20, 40, SIDE, chain)])
    assert [c.holds for c in good] == [True, True]
    noisy = pl.independence_checks([_row(1, 40, 50, chain, chain, facts=BUSY), _row(2, 38, 40, TURNS, chain, facts=BUSY)])
    # one busy CPU: the speed-up cannot be credited; the chain's 1.25x on one op at a time is the load's
    assert [c.holds for c in noisy] == [None, None]
    assert all(c.explained for c in noisy) and [c.cause for c in noisy] == ["no-spare-cpu", "trace"]


def test_mlp_checks():
    def mlp(both, only_b, losses=(1.0, 0.5), trace=SIDE):
        return SimpleNamespace(overlap=Overlap("compute", "communication", both=both, only_a=0.02, only_b=only_b,
                                               neither=0.0, span=0.03),
                               roles={"cpu:0": "host: x", "cpu:1": "d1", "cpu:2": "d2"}, trace=trace, losses=losses,
                               facts=IDLE, modelled=None, virtual=True)

    both = _trace([("cpu:1", 0, 10), ("cpu:2", 0, 10)])
    assert [c.holds for c in pl.mlp_checks(mlp(0.004, 0.004, trace=both))] == [True]
    apart = _trace([("cpu:1", 0, 10), ("cpu:2", 10, 20)])
    checks = pl.mlp_checks(mlp(0.0001, 0.004, losses=(1.0, 1.2), trace=apart))
    assert [c.holds for c in checks] == [False] and checks[0].cause == "too-small" and checks[0].explained


def test_frontend_wait_check():
    waited = _trace([("cpu:0", 0.1, 5)], blocks=[("print", 0.2, 5.1)], launches=[(0, 0.05), (0.06, 0.1)])
    c = pl.frontend_wait_check(waited)
    assert c.holds and c.number("waited_s") == pytest.approx(4.9e-3)
    none = pl.frontend_wait_check(_trace([("cpu:0", 0.1, 0.2)], launches=[(0, 0.05)]))
    assert not none.holds and none.explained


# -- real runs on modelled devices: the lessons hold, wherever this runs ------------------------------------
def test_modelled_two_devices_hold():
    r = run_two_devices(backend="modelled", ops=3, size=256, repeat=1)
    assert r.backend == "modelled" and "not measured" in r.device and r.modelled
    checks = pl.two_device_checks(r)
    assert checks[1].holds  # the barrier: exact from the trace
    assert pl.overlap_seconds(r.trace_concurrent, "cpu:0", "cpu:1") > 0


def test_modelled_independence_and_mlp():
    rows = run_independent_vs_dependent(backend="modelled", ops=4, size=192, repeat=1)
    assert all(r.backend == "modelled" and r.modelled for r in rows)
    assert pl.max_concurrency(rows[-1].trace_dependent) == 1
    assert pl.max_concurrency(rows[-1].trace_independent) == 2
    m = run_mlp_parallel(backend="modelled", batches=2, batch_size=64, hidden=64, features=16)
    assert set(m.modelled) == {"cpu:1", "cpu:2"} and "modelled" in m.roles["cpu:1"]
    assert "measured" in m.roles["cpu:0"]


def test_model_only_with_the_modelled_backend():
    from d2l_async.engine import DeviceModel

    with pytest.raises(ValueError, match="model= is for backend='modelled'"):
        run_two_devices(backend="engine", model=DeviceModel())
    with pytest.raises(ValueError, match="backend="):
        run_independent_vs_dependent(backend="cuda")


def test_gpu_results_get_a_gpu_reason():
    r = _two(40, 41, TURNS, APART)
    r.virtual, r.facts = False, None
    c = pl.two_device_checks(r)[0]
    assert not c.holds and c.cause == "gpu"


@pytest.mark.gpu
def test_two_gpus_checks_are_explained():
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    r = run_two_devices(backend="cuda", ops=3, size=2048, repeat=1)
    checks = pl.two_device_checks(r)
    assert "GPUs" in checks[0].name and all(c.holds or c.explained for c in checks)
    m = run_mlp_parallel(backend="cuda", batches=2)
    assert all(c.holds or c.explained for c in pl.mlp_checks(m))


def test_threads_on_one_cpu_never_ran_side_by_side():
    """A shorter run on one CPU is a larger share of it, not parallelism: the check says so."""
    r = _two(20, 36, SIDE, APART, facts=BUSY)  # 1.8x, overlapping intervals, but 1 usable CPU
    c = pl.two_device_checks(r)[0]
    assert not c.holds and c.cause == "no-spare-cpu"
    rows = [_row(1, 40, 40, TURNS, TURNS, facts=BUSY), _row(2, 20, 40, SIDE, TURNS, facts=BUSY)]
    assert not pl.independence_checks(rows)[0].holds
    modelled = _two(20, 36, SIDE, APART, facts=BUSY, modelled={"cpu:0": {"ops": 4, "overruns": 0}})
    assert pl.two_device_checks(modelled)[0].holds  # modelled devices sleep: one CPU is enough


def test_threads_that_took_turns_on_two_cpus_are_not_side_by_side():
    two_busy = pl.RunFacts(2.0, 1.9, 4.0, "2 usable CPUs")
    r = _two(20, 36, SIDE, APART, facts=two_busy)
    r.concurrent_cpu_seconds = 0.021  # ~1 CPU at once over 20 ms
    c = pl.two_device_checks(r)[0]
    assert not c.holds and c.cause == "no-spare-cpu"  # 1.05 CPUs at once: the threads took turns
    r.concurrent_cpu_seconds = 0.038  # ~2 CPUs at once: really side by side
    assert pl.two_device_checks(r)[0].holds
    rows = [_row(1, 40, 40, TURNS, TURNS, facts=two_busy), _row(2, 20, 40, SIDE, TURNS, facts=two_busy)]
    rows[1].independent_cpu_seconds = 0.02
    assert not pl.independence_checks(rows)[0].holds
    rows[1].independent_cpu_seconds = 0.038
    assert pl.independence_checks(rows)[0].holds


def test_mlp_threads_that_took_turns():
    r = SimpleNamespace(overlap=Overlap("compute", "communication", both=0.004, only_a=0.02, only_b=0.004,
                                        neither=0.0, span=0.03),
                        roles={"cpu:0": "host: x", "cpu:1": "d1", "cpu:2": "d2"},
                        trace=_trace([("cpu:1", 0, 10), ("cpu:2", 0, 10)]), losses=(1.0, 0.5),
                        facts=pl.RunFacts(2.0, 1.9, 4.0, "2"), modelled=None, virtual=True, seconds=0.03,
                        cpu_seconds=0.03)
    (comm,) = pl.mlp_checks(r)
    assert not comm.holds and comm.cause == "no-spare-cpu"  # 1.00 CPUs at once: the threads took turns
    r.cpu_seconds = 0.057
    assert [c.holds for c in pl.mlp_checks(r)] == [True]


def test_a_speedup_inside_the_spread_cannot_tell():
    wide = _two(20, 36, SIDE, APART)
    wide.concurrent_runs, wide.serialized_runs = (0.015, 0.020, 0.032), (0.030, 0.036, 0.022)
    c = pl.two_device_checks(wide)[0]
    assert c.holds is None and c.role == "speed-up" and c.decided_by.startswith("compare:")
