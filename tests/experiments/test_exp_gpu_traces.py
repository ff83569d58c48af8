"""The CUDA lesson checks on synthetic Kineto traces of CUDA runs: no GPU needed.

Each test feeds a check the trace a CUDA run writes (tests/_cuda_traces.py: torch 2.13's categories,
launch calls and flows, one or two GPUs) and asserts what the check must conclude there.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from d2l_async.experiments import parallel_lessons as pl
from d2l_async.experiments.mlp_parallel import compute_comm_overlap

from .. import _cuda_traces as C


def _two(tc, ts, conc_ms=1.1, ser_ms=2.1):
    spread = (0.99, 0.995, 1.0, 1.005, 1.01)  # five runs each, 1% apart: the GPUs' steady timings
    return SimpleNamespace(devices=("cuda:0", "cuda:1"), concurrent_seconds=conc_ms / 1e3,
                           serialized_seconds=ser_ms / 1e3, speedup=ser_ms / conc_ms, trace_concurrent=tc,
                           trace_serialized=ts, facts=None, modelled=None, virtual=False,
                           concurrent_runs=tuple(conc_ms / 1e3 * f for f in spread),
                           serialized_runs=tuple(ser_ms / 1e3 * f for f in spread))


# -- finding 3: kernels are device work -------------------------------------------------------------------
def test_device_intervals_are_the_kernels_of_each_gpu(tmp_path):
    t = C.two_gpu_products(tmp_path, ops=10)
    for dev in ("cuda:0", "cuda:1"):
        iv = pl.device_intervals(t, dev)
        assert len(iv) == 10 and all(e - s == pytest.approx(100e-6) for s, e in iv)
    assert len(pl.device_intervals(t)) == 20  # the frontend's aten::mm slices are not device work
    assert pl.overlap_seconds(t, "cuda:0", "cuda:1") > 0


def test_two_gpu_checks_hold_on_kernels(tmp_path):
    side, apart = C.two_gpu_products(tmp_path, ops=10), C.two_gpu_products(tmp_path, ops=10, serialized=True)
    checks = pl.two_device_checks(_two(side, apart))
    assert [c.holds for c in checks] == [True, True], [c.shown for c in checks]
    assert checks[0].claim == "07.side-by-side" and "GPUs" in checks[0].name  # the claim names what ran


def test_two_gpu_checks_fail_with_a_cuda_reason_when_the_gpus_took_turns(tmp_path):
    apart = C.two_gpu_products(tmp_path, ops=10, serialized=True)
    first = pl.two_device_checks(_two(apart, apart, conc_ms=2.0, ser_ms=2.1))[0]
    assert not first.holds and first.explained and first.cause == "gpu"
    assert "synchroniz" in first.otherwise


def test_mlp_checks_see_kernels_and_copies_on_two_gpus(tmp_path):
    t = C.mlp_two_gpus(tmp_path)
    r = SimpleNamespace(overlap=compute_comm_overlap(t), trace=t, roles={"cpu": "host: makes minibatches",
                        "cuda:0": "GPU 0", "cuda:1": "GPU 1"}, modelled=None, virtual=False, facts=None,
                        losses=(1.0, 0.5, 0.25), seconds=1e-3)
    (hidden,) = pl.mlp_checks(r)
    assert hidden.holds, hidden.shown


# -- finding 4: the run's opening synchronize is not the barrier ----------------------------------------
def test_barrier_overlap_splits_at_the_event_wait_not_the_opening_synchronize(tmp_path):
    from d2l_async.experiments import barriers

    t = C.barrier_run(tmp_path, chain=8, follow=8)
    overlap, follow = barriers.overlap_seconds(t)
    assert follow == pytest.approx(8 * 200e-6 + 3e-6, rel=1e-3)  # the follow-up and the copy of z
    assert overlap > 0.5 * follow  # the follow-up ran beside the chain on the other stream


def test_barrier_checks_keep_the_overlap_lesson_on_cuda(tmp_path):
    from d2l_async.experiments import barriers

    t = C.barrier_run(tmp_path)
    r = barriers.BarrierResult(
        waitall_wait=1.6e-3, wait_to_read_wait=14e-6, waitall_total=3.3e-3, wait_to_read_total=1.8e-3,
        trace_waitall=t, trace_wait_to_read=t, long_ops=8, size=2048, follow_ops=8, backend="cuda",
        device="NVIDIA H200", virtual=False, barrier_names=("torch.cuda.synchronize(device)", "event.synchronize() after z"),
        waitall_next=1.7e-3, wait_to_read_next=60e-6)
    checks = barriers.checks(r)
    assert [c.holds for c in checks] == [True, True], [c.shown for c in checks]


# -- finding 9: blockers on CUDA ---------------------------------------------------------------------------
def _blockers_cuda(book_a, book_i, every, once, size=1000):
    from d2l_async._machine import Machine
    from d2l_async.experiments import blockers as B
    from d2l_async.experiments._common import make_measurement as mm

    base = mm("no blocker", [8e-6, 8.1e-6, 8.2e-6])
    per = {k: mm(k, [30e-6, 31e-6, 32e-6]) for k in B.BLOCKERS}
    m = Machine(16.0, 16, None, 16, 0.5, 2**37, None, ("NVIDIA H200",), busy_cpus=0.2)
    spread = (0.99, 1.0, 1.01)
    return B.BlockersResult(per, base, {"asnumpy": mm("a", [book_a * f for f in spread]),
                                        "item": mm("i", [book_i * f for f in spread])},
                            mm("every", [every * f for f in spread]), mm("once", [once * f for f in spread]), (),
                            None, 1000, size, "cuda", "NVIDIA H200", False, m)


def test_once_at_the_end_is_one_copy_to_the_host():
    """"Convert once at the end" must be one device-to-host copy, not one float() per loss."""
    torch = pytest.importorskip("torch")
    from torch.overrides import TorchFunctionMode

    from d2l_async.experiments import blockers as B

    class Conversions(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if name in ("__float__", "item", "tolist", "cpu", "numpy", "to"):
                self.n += 1
            return func(*args, **(kwargs or {}))

    losses = [torch.tensor(float(i)) for i in range(50)]
    with Conversions() as mode:
        values = B.gather_once(losses)
    assert values == [float(i) for i in range(50)] and mode.n == 1


def test_item_vs_asnumpy_on_cuda_is_explained_by_the_copy_not_the_cpu():
    from d2l_async.experiments import blockers as B

    item_vs = B.checks(_blockers_cuda(book_a=1.3e-3, book_i=0.15e-3, every=9e-3, once=2e-3))[0]
    assert not item_vs.holds and item_vs.explained and item_vs.cause == "gpu"
    why = item_vs.otherwise
    assert "whole 1000x1000 matrix" in why and "4 bytes" in why and "pageable" in why
    assert "other work on the CPU" not in why


def test_every_step_on_cuda_is_explained_in_cudas_terms():
    from d2l_async.experiments import blockers as B

    every = B.checks(_blockers_cuda(book_a=1.3e-3, book_i=1.2e-3, every=2.0e-3, once=2.0e-3))[1]
    assert not every.holds
    text = every.otherwise + " " + (getattr(every, "unclear", "") or "")
    assert "launch" in text and "GPU" in text
    for cpu_word in ("worker", "thread", "GIL", "interpreter lock", "spare core"):
        assert cpu_word not in text, cpu_word


# -- finding 6: the CUDA MLP is timed after a warm-up run -----------------------------------------------
def test_the_cuda_mlp_times_its_second_run():
    from d2l_async.experiments.mlp_parallel import timed_after_warmup

    log: list[str] = []
    ticks = iter([10.0, 10.5])

    def clock():
        log.append("clock")
        return next(ticks)

    seconds = timed_after_warmup(lambda: log.append("run"), lambda: log.append("reset"), clock=clock)
    assert log == ["reset", "run", "reset", "clock", "run", "clock"]  # the first run is not timed
    assert seconds == pytest.approx(0.5)


# -- low items: CUDA results explained in CUDA's terms -------------------------------------------------
ENGINE_WORDS = ("worker", "thread", "GIL", "interpreter lock", "setswitchinterval", "spare core", "took turns")


def _cuda_words_only(text):
    for word in ENGINE_WORDS:
        assert word not in text, f"{word!r} in a CUDA explanation: {text}"


def test_cuda_facts_read_launch_latency_and_the_queue(tmp_path):
    from d2l_async.experiments._cuda_why import LAUNCH_QUEUE_CAP, cuda_facts

    keep_up = cuda_facts(C.increments(tmp_path, ops=50, launch_us=5, kernel_us=2))
    # the queue holds only the launches still on their way to the GPU (a launch takes 25 us to land): it
    # never grows with the run
    in_flight = math.ceil(C.LAUNCH_LATENCY_US / 5) + 1
    assert keep_up.launches == 50 and keep_up.max_queue <= in_flight and not keep_up.at_cap
    # the CPU spends 5 us per op (3 us of it in cudaLaunchKernel): the launch cost is the 5 us
    assert keep_up.kernel_s == pytest.approx(2e-6) and keep_up.launch_s == pytest.approx(5e-6)
    assert keep_up.launch_call_s == pytest.approx(3e-6)
    assert keep_up.waits == 0  # the run's final synchronize and the capture's are in nothing's way
    from d2l_async.capture import blocking_copies

    demo = C.blocker_demo(tmp_path)
    # before the last launch: five stream syncs between the demo's six lines and the two copies into pageable
    # memory (.cpu()): the reader files those as waits, blocking_copies adds none; the pinned copies of
    # .item(), float() and if are launches that return at once
    assert cuda_facts(demo).waits == cuda_facts(blocking_copies(demo)).waits == 7
    # six kernels and six copies: each copy was put on the stream (a launch); the launch call's own cost is
    # the calls' that did not wait (4 us), not the pageable copies' held calls
    assert cuda_facts(demo).launches == 12 and cuda_facts(demo).launch_call_s == pytest.approx(4e-6)
    capped = cuda_facts(C.increments(tmp_path, ops=1300, launch_us=5, kernel_us=50, queue_cap=LAUNCH_QUEUE_CAP))
    assert capped.at_cap and LAUNCH_QUEUE_CAP - 2 <= capped.max_queue <= LAUNCH_QUEUE_CAP + 1
    assert capped.slow_launches >= 100  # each launch past the cap waits for a kernel to start


def test_only_waits_between_the_first_and_the_last_launch_count(tmp_path):
    """sync_async's traced run opens with ``torch.cuda.synchronize`` (nothing queued) and ends with its own
    and the capture's: none of them held up a launch, so an asynchronous loop without a blocker has no wait
    inside it, and its lower-bound line names none."""
    from d2l_async.experiments._cuda_why import cuda_facts

    opened = C.increments(tmp_path, ops=50, launch_us=5, kernel_us=2, opening_sync=True)
    assert len(opened.where(kind="block")) == 3  # the opening, the run's last and the capture's synchronize
    f = cuda_facts(opened)
    assert (f.waits, f.wait_s) == (0, 0.0)
    r = _sync_async_cuda(opened, 5e-6, 2e-6, 20e-6, 50)
    (faster,) = r.lessons()
    assert "synchronizing call" not in faster.shown + faster.otherwise
    # a synchronize between two launches is a wait inside the loop, and still counted
    g = C.KinetoFile()
    g.sync("cudaDeviceSynchronize", 5, 3)
    for i, t in enumerate((10.0, 16.0, 60.0, 66.0)):
        g.cpu_op("aten::add_", t, 5)
        g.kernel(t + 1, 3, t + 1 + C.LAUNCH_LATENCY_US, 2, name=C.ADD)
        if i == 1:
            g.sync("cudaStreamSynchronize", t + 5, 30)
    g.sync("cudaDeviceSynchronize", 100, 2)
    inside = cuda_facts(C.as_capture(g.trace(tmp_path, "one_wait_inside.json")))
    assert inside.waits == 1 and inside.wait_s == pytest.approx(30e-6)


def _asynchrony_cuda(trace, naive, synced):
    from d2l_async.experiments._common import make_measurement as mm

    return SimpleNamespace(naive=mm("naive", naive), synced=mm("synced", synced), trace=trace, backend="cuda",
                           machine=None, size=64, matmuls=50)


@pytest.mark.parametrize("case", ["launch latency", "queue cap"])
def test_asynchrony_on_cuda_explains_itself_with_the_gpus_reasons(tmp_path, case):
    from d2l_async.experiments import asynchrony as A

    if case == "launch latency":
        trace = C.increments(tmp_path, ops=50, launch_us=5, kernel_us=2)
        word = "launch latency"
    else:
        trace = C.increments(tmp_path, ops=1300, launch_us=5, kernel_us=50, queue_cap=1024)
        word = "1024"
    timer, ahead = A.checks(_asynchrony_cuda(trace, [0.9e-3, 0.91e-3, 0.92e-3], [1.0e-3, 1.01e-3, 1.02e-3]))
    assert timer.holds is False
    assert ahead.holds is (case == "queue cap")  # at the cap the CPU is still done long before the GPU
    for c in (timer, ahead):
        if c.holds is not True:
            assert word in c.otherwise, c.otherwise
            _cuda_words_only(c.otherwise)


@pytest.mark.parametrize("naive, synced, holds", [(1.1e-3, 1.0e-3, False), ((0.4e-3, 0.6e-3), (0.9e-3, 1.1e-3), None)])
def test_a_hand_timed_cuda_loop_gets_the_gpus_reasons(naive, synced, holds):
    """Notebook 01 times its CUDA loop by hand (no trace): its ✘ and its can't-tell speak of launches and
    the queue, never of worker threads, the interpreter lock or a spare core."""
    from d2l_async._machine import Machine
    from d2l_async.experiments import asynchrony as A

    busy_cpu = Machine(1.0, 1, None, 2, 1.9, 2**33, None, ("NVIDIA H200",), busy_cpus=1.0)
    on_gpu = A.timer_check(naive, synced, busy_cpu, backend="cuda")
    on_cpu = A.timer_check(naive, synced, busy_cpu)
    assert on_gpu.holds is holds and on_cpu.holds is holds  # the same verdict: only the reason differs
    words = on_gpu.otherwise
    _cuda_words_only(words)
    assert "launch" in words and "1024" in words and "usable CPU" not in words
    # on the engine a can't-tell is the spread's, a ✘ the CPUs' (the cause field, not the words)
    assert on_cpu.cause == ("spread" if holds is None else on_cpu.cause) and on_cpu.cause != "gpu"
    assert on_gpu.cause in (("spread", "gpu") if holds is None else ("gpu",))
    with pytest.raises(ValueError, match="backend"):
        A.timer_check(naive, synced, backend="gpu")


def test_the_books_loop_on_cuda_gets_the_gpus_reasons():
    from d2l_async._machine import Machine
    from d2l_async.experiments._sync_async_lessons import book_loop_check

    busy_cpu = Machine(1.0, 1, None, 2, 1.9, 2**33, None, ("NVIDIA H200",), busy_cpus=1.0)
    slower = book_loop_check([0.20, 0.21, 0.2], [0.25, 0.26, 0.25], ops=10_000, machine=busy_cpu, backend="cuda")
    assert slower.holds is False
    _cuda_words_only(slower.otherwise)
    assert slower.cause == "gpu" and "round trip" in slower.otherwise
    assert book_loop_check([0.20, 0.21, 0.2], [0.25, 0.26, 0.25], ops=10_000, machine=busy_cpu).cause == "no-spare-cpu"


def _sync_async_cuda(trace, t1, t2, t3, ops, *, miss=1.6):
    from d2l_async.experiments._common import make_measurement as mm
    from d2l_async.experiments._cost_model import CostModel
    from d2l_async.experiments.sync_async import SyncAsyncResult

    model = CostModel(ops, t1, t2, t3, "backend pace")
    sync = [ops * (t1 + t2 + t3) * f for f in (0.99, 1.0, 1.01)]
    asyn = [ops * max(t1, t2) * f * miss for f in (0.99, 1.0, 1.01)]  # the model misses by 60% (default)
    return SyncAsyncResult(mm("sync", sync), mm("async", asyn), model, trace, trace, ops, 1, "cuda", "NVIDIA H200",
                           False)


def test_sync_async_queue_on_cuda_counts_kernels_not_cpu_ops_and_the_cap(tmp_path):
    trace = C.increments(tmp_path, ops=1300, launch_us=5, kernel_us=50, queue_cap=1024)
    r = _sync_async_cuda(trace, 5e-6, 50e-6, 20e-6, 1300)
    q = r.queue_lesson()
    assert q.shown.endswith("of 1300 ops")  # kernels only: the 1300 aten::add_ slices are not device work
    assert q.holds is True, q.shown  # filled to CUDA's cap: full on a GPU, though under half of 1300


def test_sync_async_on_cuda_explains_the_model_in_cudas_terms(tmp_path):
    trace = C.increments(tmp_path, ops=50, launch_us=5, kernel_us=2)
    r = _sync_async_cuda(trace, 5e-6, 2e-6, 20e-6, 50)
    (faster,) = r.lessons()
    assert faster.holds is True and faster.claim == "05.async-faster"
    slower = _sync_async_cuda(trace, 5e-6, 2e-6, 20e-6, 50, miss=10)  # asynchronous slower than synchronous
    (lost,) = slower.lessons()
    assert lost.holds is False and lost.cause == "gpu" and "t3 + min(t1, t2)" in lost.otherwise
    _cuda_words_only(lost.otherwise)
    q = r.queue_lesson()
    if q.holds is not True:
        _cuda_words_only(q.otherwise)


def test_barriers_on_cuda_explain_a_miss_with_streams_not_cpus(tmp_path):
    from d2l_async.experiments import barriers

    t = C.barrier_run(tmp_path, z_behind=True)  # z's kernel starts only when a running product ends
    r = barriers.BarrierResult(
        waitall_wait=1.6e-3, wait_to_read_wait=1.5e-3, waitall_total=3.3e-3, wait_to_read_total=3.2e-3,
        trace_waitall=t, trace_wait_to_read=t, long_ops=8, size=8192, follow_ops=8, backend="cuda",
        device="NVIDIA H200", virtual=False, barrier_names=("torch.cuda.synchronize(device)", "event.synchronize() after z"),
        waitall_next=1.7e-3, wait_to_read_next=1.6e-3, waitall_next_runs=(1.7e-3, 1.71e-3, 1.69e-3),
        wait_to_read_next_runs=(1.6e-3, 1.61e-3, 1.59e-3))
    sooner = barriers.checks(r)[0]
    assert sooner.holds is False
    assert "stream" in sooner.otherwise and "multiprocessors" in sooner.otherwise
    _cuda_words_only(sooner.otherwise)
    assert "CPU" not in sooner.otherwise.replace("nothing on the CPU side", "")


def test_the_sweep_on_cuda_explains_itself_with_launches_and_round_trips():
    from d2l_async.experiments._cost_model import CostModel
    from d2l_async.experiments.sync_async import SweepPoint, SyncAsyncSweep

    pts = tuple(SweepPoint(1000, n, 1000 * 30e-6, 1000 * 8e-6, CostModel(1000, 6e-6, t2, 20e-6))
                for n, t2 in ((1, 2e-6), (10**2, 2.05e-6), (10**4, 2.1e-6), (10**6, 2.2e-6)))
    (shrinks,) = SyncAsyncSweep(pts, "cuda", "NVIDIA H200", False).lessons()
    assert shrinks.holds is not True and shrinks.cause == "gpu"
    _cuda_words_only(shrinks.otherwise)
    assert "usable CPU" not in shrinks.otherwise and "wake-up" not in shrinks.otherwise


def test_the_last_push_of_a_cuda_run_can_be_a_copy_into_pageable_memory(tmp_path):
    """A run ending in ``.cpu()`` ends with a copy into pageable memory: a launch call filed as a wait.  The
    frontend issued its last work when that call returned, not when the last kernel launch did."""
    import numpy as np

    from d2l_async.experiments.asynchrony import issue_and_finish
    from d2l_async.trace import launch_calls

    f = C.KinetoFile()
    for i in range(3):
        f.cpu_op("aten::add", 10 + 8 * i, 6)
        f.kernel(11 + 8 * i, 4, 11 + 8 * i + C.LAUNCH_LATENCY_US, 3, name=C.ADD)
    f.cpu_op("aten::_to_copy", 40, 40)  # b.cpu(): the call holds the CPU until the copy is done
    f.memcpy(42, 30, 70, 2, what="DtoH (Device -> Pageable)")
    f.sync("cudaStreamSynchronize", 73, 2)
    f.sync("cudaDeviceSynchronize", 90, 2)
    demo = C.as_capture(f.trace(tmp_path, "ends_with_cpu.json"))
    calls = demo.filter(launch_calls(demo))
    kernels = demo.where(kind="launch")
    t0 = min(float(calls["start"].min()), float(demo.filter(np.isin(demo.columns["lane"],
                                                                    [l.name for l in demo.backend_lanes]))["start"].min()))
    ahead = issue_and_finish(demo)
    assert float(calls["end"].max()) > float(kernels["end"].max())  # the copy came last
    assert ahead.issued == pytest.approx(float(calls["end"].max()) - t0)
