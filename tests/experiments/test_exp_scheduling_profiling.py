from __future__ import annotations

import pytest

from d2l_async.experiments import export_perfetto, run_profiling, run_scheduling, sample_summaries
from d2l_async.trace import read_chrome_trace


def test_scheduling_rows():
    r = run_scheduling(workers=(4, 1, 2), ops=100)
    assert r.workers == (1, 2, 4)
    assert len(r.per_op_seconds) == 3 and all(0 < s < 0.1 for s in r.per_op_seconds)
    assert [w for w, _ in r.rows()] == [1, 2, 4] and r.growth > 0
    assert r.virtual and r.cpu_count >= 1


@pytest.mark.parametrize("kwargs", [{"workers": ()}, {"workers": (0,)}, {"workers": (1, 300)}, {"ops": 0}])
def test_scheduling_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        run_scheduling(**kwargs)


@pytest.fixture(scope="module")
def profile():
    return run_profiling(steps=1, batch_size=8, hidden=16, backend="cpu")


def test_profiling_on_cpu_is_real_pytorch_not_a_gpu(profile):
    assert profile.events == len(profile.trace) > 0
    assert not profile.virtual and profile.backend == "cpu"
    assert "CPU" in profile.device and "GPU" not in profile.device.replace("no GPU", "")


def test_export_perfetto_round_trip(profile, tmp_path):
    path = export_perfetto(profile.trace, tmp_path / "sub" / "run.json")
    assert path.exists() and path.stat().st_size > 0
    back = read_chrome_trace(path)
    assert len(back) > 0
    with pytest.raises(ValueError, match=".json"):
        export_perfetto(profile.trace, tmp_path / "run.txt")


def test_sample_summaries():
    (s,) = sample_summaries(("a100_training_step",))
    assert "A100" in s.gpu and s.max_queue > 100


def test_profiling_bad_backend():
    with pytest.raises(ValueError, match="backend"):
        run_profiling(backend="engine")


# ---------------------------------------------------------------- profiling lesson checks (synthetic results)
def _prof(backend, backend_events, max_queue):
    from d2l_async.experiments.profiling import ProfilingResult

    return ProfilingResult(None, "MLP", 2, 64, 300, backend_events, max_queue, 0.0, backend, "dev", False)


def test_profiling_checks_read_the_result():
    from d2l_async.experiments import profiling as P

    assert [c.holds for c in P.checks(_prof("cpu", 0, 0))] == [True]
    bad = P.checks(_prof("cpu", 5, 0))[0]
    assert not bad.holds and bad.explained and bad.cause == "trace" and bad.number("backend_events") == 5
    gpu = P.checks(_prof("cuda", 200, 40))[0]
    assert gpu.holds and gpu.number("max_queue") == 40
    flat = P.checks(_prof("cuda", 200, 0))[0]
    assert not flat.holds and flat.explained


def test_sample_checks_on_the_shipped_traces():
    from d2l_async.experiments import profiling as P

    checks = P.sample_checks(P.sample_summaries())
    assert len(checks) == 1 and checks[0].holds and checks[0].claim == "09.recorded-queues"
    assert checks[0].number("max_queue v100_training_step") == 1022  # computed from the shipped file
    shallow = P.sample_checks(P.sample_summaries(("a100_alexnet",)))[0]
    assert shallow.holds is False and shallow.cause == "trace"
