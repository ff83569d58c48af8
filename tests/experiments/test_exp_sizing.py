"""The sizing: a pure function of measured launch and kernel times, a thin measuring wrapper, and the CUDA
experiments and workloads that use it (no GPU: the measuring part runs on fakes)."""

from __future__ import annotations

import math

import pytest

from d2l_async.experiments import _gpu_probe as P
from d2l_async.experiments import sizing as S

from .. import _gpu_models as G


def _times(**over):
    base = dict(device="GPU", launch_s=5e-6, matmul_launch_s=8e-6, round_trip_s=15e-6,
                matmul_s={512: 10e-6, 1024: 40e-6, 2048: 300e-6}, add_s={10**5: 2e-6, 10**6: 4e-6, 10**7: 25e-6})
    return S.DeviceTimes(**{**base, **over})


# -- the pure part ---------------------------------------------------------------------------------------------
def test_kernel_time_reads_the_probes_line():
    probes = {1000: 1e-5, 10_000: 1e-4}
    assert S.kernel_time(probes, 1000, power=1) == pytest.approx(1e-5)
    assert S.kernel_time(probes, 10_000, power=1) == pytest.approx(1e-4)
    assert S.kernel_time(probes, 3162, power=1) == pytest.approx(math.sqrt(1e-5 * 1e-4), rel=1e-3)  # log-log
    assert S.kernel_time(probes, 10, power=1) == pytest.approx(1e-5)  # never below the shortest kernel measured
    assert S.kernel_time({512: 1e-5}, 1024, power=3) == pytest.approx(8e-5)  # a product's side, cubed


def test_each_size_is_the_smallest_that_reaches_its_rule():
    sizes = S.size_for_device(G.H200.times())
    candidates = {"asynchrony": S.SIDES, "barriers": S.SIDES, "blockers": S.SIDES}
    for c in sizes.choices:
        assert c.reached and c.kernel_s >= c.needed_s == pytest.approx(c.multiple * c.against_s)
        cands = candidates.get(c.key, S.NUMELS)
        power = 3 if c.key in candidates else 1
        smaller = [n for n in cands if n < c.size]
        if smaller:  # the next smaller candidate falls short
            probes = sizes.times.matmul_s if c.key in candidates else sizes.times.add_s
            assert S.kernel_time(probes, smaller[-1], power=power) < c.needed_s
    t = sizes.times
    by = {c.key: c for c in sizes.choices}
    assert by["asynchrony"].against_s == t.matmul_launch_s and by["blockers"].against_s == t.launch_s + t.round_trip_s
    assert by["sync_async_sweep last"].against_s == t.launch_s + t.round_trip_s
    assert sizes.asynchrony == by["asynchrony"].size and sizes.queue_numel == by["sync_async_queue"].size


def test_the_sweep_starts_at_one_element_and_spans_the_two_rules():
    sizes = S.size_for_device(G.T4.times())
    by = {c.key: c.size for c in sizes.choices}
    for numels, points in ((sizes.sweep_numels, S.SWEEP_POINTS), (sizes.sweep_numels_quick, S.SWEEP_POINTS_QUICK)):
        assert len(numels) == points and numels[0] == 1
        assert list(numels) == sorted(set(numels))
        assert numels[1] == by["sync_async_sweep first"] and numels[-1] == by["sync_async_sweep last"]
        steps = [b / a for a, b in zip(numels[1:], numels[2:])]
        assert max(steps) / min(steps) < 1.3  # evenly spaced in log (two significant digits)


def test_a_gpu_too_small_for_a_rule_gets_its_largest_allowed_size_and_says_so():
    slow = _times(matmul_s={256: 1e-6}, add_s={1000: 1e-9}, free_bytes=6 * 4 * 1024**2)  # 4 MiB per tensor
    sizes = S.size_for_device(slow)
    assert not sizes.reached
    assert sizes.asynchrony == 1024 and sizes.queue_numel <= 1024**2  # a sixth of the free memory per tensor
    assert all(not c.reached for c in sizes.choices)
    assert "short of it" in sizes.choices[0].sentence()


def test_the_kwargs_of_each_workload():
    sizes = S.size_for_device(_times())
    assert sizes.kwargs("asynchrony") == {"size": sizes.asynchrony}
    assert sizes.kwargs("sync_async_queue") == {"numel": sizes.queue_numel}
    assert sizes.kwargs("sync_async_sweep", quick=True) == {"numels": sizes.sweep_numels_quick}
    assert set(S.WORKLOADS) == {"asynchrony", "barriers", "blockers", "sync_async_sweep", "sync_async_queue"}
    with pytest.raises(ValueError, match="key"):
        sizes.kwargs("nope")
    d = sizes.to_dict()
    assert d["times"]["matmul_s"]["1024"] == pytest.approx(40e-6) and len(d["choices"]) == len(S.RULES)


@pytest.mark.parametrize("field, value, says", [
    ("launch_s", 0.0, "launch_s"), ("round_trip_s", -1e-6, "round_trip_s"), ("matmul_s", {}, "matmul_s"),
    ("add_s", {10: -1.0}, "add_s"), ("matmul_s", 3, "matmul_s"), ("free_bytes", 0, "free_bytes"),
    ("device", None, "device"), ("add_s", [(10, 1e-6), (10, 2e-6)], "twice")])
def test_bad_times_are_refused_by_name(field, value, says):
    with pytest.raises((TypeError, ValueError), match=says):
        _times(**{field: value})


def test_size_for_device_wants_times():
    with pytest.raises(TypeError, match="times"):
        S.size_for_device({"launch_s": 5e-6})


# -- the engine keeps its workloads; CUDA is refused without a GPU --------------------------------------------
def test_the_engines_workloads_need_no_gpu():
    assert S.workload("barriers", backend="engine") == {}
    assert S.workload("sync_async_queue", backend="engine") == {"numel": 100_000}
    with pytest.raises(ValueError, match="key"):
        S.workload("nope", backend="engine")


def test_measuring_needs_a_cuda_device():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="device"):
        S.measure_device(device="cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            S.device_sizes(device="cuda:0")


# -- the measuring part, on fakes ----------------------------------------------------------------------------------
class _Clock:
    """A fake GPU clock: each op queued between two events adds its kernel time."""

    def __init__(self):
        self.t = 0.0


def test_probing_stops_at_the_first_size_that_reaches_the_target(monkeypatch):
    torch = pytest.importorskip("torch")
    clock = _Clock()

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self, *a):
            self.at = clock.t

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3  # ms

    monkeypatch.setattr(torch.cuda, "Event", Event)
    made = []

    def make(n):
        made.append(n)

        def op():
            clock.t += n * 1e-9  # 1 ns an element
        return op

    spin = lambda s: None  # noqa: E731
    spin.spins = True
    out = P.probe(make, (10**3, 10**4, 10**5, 10**6, 10**7), lambda n: 8 * n, 50e-6, 10**12, spin,
                   lambda: None, 5e-6)
    assert list(out) == [10**3, 10**4, 10**5]  # 100 µs at 10**5 reaches the 50 µs target: no larger probe
    assert out[10**5] == pytest.approx(100e-6) and made == list(out)
    small = P.probe(make, (10**3, 10**4, 10**5), lambda n: 8 * n, 1.0, 4 * 8 * 10**4, spin, lambda: None, 5e-6)
    assert list(small) == [10**3, 10**4]  # 10**5 would not fit in the free memory


def test_device_sizes_measures_once_per_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    calls = []
    monkeypatch.setattr(P, "cuda_device", lambda d: torch.device("cuda", 0))
    monkeypatch.setattr(S, "measure_device", lambda device: calls.append(device) or G.T4.times())
    monkeypatch.setattr(S, "_MEASURED", {})
    first = S.device_sizes()
    assert S.device_sizes() is first and len(calls) == 1
    assert S.device_sizes(refresh=True) == first and len(calls) == 2
    assert first == S.size_for_device(G.T4.times())


# -- the CUDA experiments size themselves, and honour a size given ------------------------------------------------
class Ran(Exception):
    pass


@pytest.fixture
def fake_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "NVIDIA H200")
    sizes = S.size_for_device(G.H200.times())
    monkeypatch.setattr(S, "_MEASURED", {0: sizes})
    monkeypatch.setattr(P, "cuda_device", lambda d: torch.device("cuda", 0))
    return sizes


@pytest.mark.parametrize("module, run, field", [("asynchrony", "run_asynchrony", "asynchrony"),
                                                ("barriers", "run_barriers", "barriers"),
                                                ("blockers", "run_blockers", "blockers")])
def test_each_cuda_experiment_runs_at_this_gpus_size(fake_gpu, monkeypatch, module, run, field):
    import importlib

    mod = importlib.import_module(f"d2l_async.experiments.{module}")
    seen = []

    def runner(*args):
        seen.append(args)
        raise Ran

    monkeypatch.setattr(mod, "_cuda", runner)
    monkeypatch.setattr("d2l_async.devices.machine", lambda **kw: None)
    with pytest.raises(Ran):
        getattr(mod, run)(backend="cuda")
    assert getattr(fake_gpu, field) in seen[-1]
    with pytest.raises(Ran):
        getattr(mod, run)(backend="cuda", size=320)  # a size given is the size run
    assert 320 in seen[-1] and getattr(fake_gpu, field) not in seen[-1]


@pytest.mark.parametrize("quick", ["1", "0"])
def test_the_cuda_sweep_runs_at_this_gpus_sizes(fake_gpu, monkeypatch, quick):
    from d2l_async.experiments import sync_async

    from types import SimpleNamespace

    from d2l_async.experiments._cost_model import CostModel

    monkeypatch.setenv("D2L_ASYNC_QUICK", quick)
    seen = []

    def point(**kw):
        seen.append(kw["numel"])
        timed = SimpleNamespace(median=1e-3)
        return SimpleNamespace(sync=timed, async_=timed, model=CostModel(1, 1e-6, 1e-6, 1e-6), cpu_sync=None,
                               cpu_async=None)

    monkeypatch.setattr(sync_async, "run_sync_async", point)
    monkeypatch.setattr("d2l_async.devices.machine", lambda **kw: None)
    sweep = sync_async.sweep_sync_async(backend="cuda", ops=(10,))
    want = fake_gpu.sweep_numels_quick if quick == "1" else fake_gpu.sweep_numels
    assert tuple(seen) == want and tuple(p.numel for p in sweep.points) == want
    assert S.workload("sync_async_sweep", backend="cuda") == {"numels": want}
    assert S.workload("sync_async_queue", backend="cuda") == {"numel": fake_gpu.queue_numel}


def test_measure_device_runs_its_steps_on_a_stand_in_gpu(monkeypatch):
    """No GPU here: torch's CPU tensors stand in for CUDA ones and a wall clock for CUDA's events, so every
    line of the measuring wrapper runs (the numbers are the CPU's, and only their shape is checked)."""
    import time

    torch = pytest.importorskip("torch")
    real_ones, real_randn = torch.ones, torch.randn
    slept = []

    class Event:
        def __init__(self, enable_timing=False):
            self.at = 0.0

        def record(self, *a):
            self.at = time.perf_counter()

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3

    class Device:
        def __init__(self, dev):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    for name, value in {"is_available": lambda: True, "device_count": lambda: 1, "synchronize": lambda *a: None,
                        "_sleep": slept.append, "Event": Event, "device": Device,
                        "mem_get_info": lambda *a: (2 * 10**9, 4 * 10**9),
                        "get_device_name": lambda *a: "stand-in GPU"}.items():
        monkeypatch.setattr(torch.cuda, name, value, raising=False)
    monkeypatch.setattr(torch, "ones", lambda *s, device=None, **k: real_ones(*s, **k))
    monkeypatch.setattr(torch, "randn", lambda *s, device=None, **k: real_randn(*s, **k))
    t = S.measure_device(device="cuda:0")
    assert t.device == "stand-in GPU" and t.free_bytes == 2 * 10**9 and "_sleep" in t.how
    assert t.launch_s > 0 and t.matmul_launch_s > 0 and t.round_trip_s >= 0
    assert [n for n, _ in t.matmul_s] == list(S.SIDE_PROBES[:len(t.matmul_s)])  # smallest first, stopped early
    assert [n for n, _ in t.add_s] == list(S.NUMEL_PROBES[:len(t.add_s)])
    assert slept and all(c >= 1000 for c in slept[1:])  # each probe queued behind a spin
    assert S.size_for_device(t).times is t
