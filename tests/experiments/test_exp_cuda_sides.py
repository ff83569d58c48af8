"""On CUDA each lesson is decided from the GPU's own record: kernels and launch intervals in the trace.

The CPU engine's sides are threads the CPU clock measures; a GPU's work is seen by no CPU clock (the
process's CPU time beyond the frontend thread is a few background threads).  Each test feeds a check a
synthetic CUDA capture (tests/_cuda_traces.py, with a real GPU's launch latency) and a CPU clock as a CUDA
run reads it, and asserts the check's fields.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from d2l_async.experiments._common import make_measurement as mm
from d2l_async.experiments._cost_model import CostModel, backend_pace, side_costs, t2_share
from d2l_async.experiments._cpu import CpuTimes
from d2l_async.experiments.sync_async import SweepPoint, SyncAsyncResult, SyncAsyncSweep

from .. import _cuda_traces as C

SPREAD = (0.99, 1.0, 1.01)


def _cuda_cpu(wall: float) -> CpuTimes:
    """The CPU clock of a CUDA run: the frontend thread busy all along, the process's other threads
    (CUDA's and torch's helpers) 2% of that: no worker computes anything."""
    return CpuTimes(wall, 0.9 * wall, 0.9 * wall * 1.02)


def _result(trace, ops, *, t1, t3=15e-6, numel=1):
    t2, source = backend_pace(trace)
    model = CostModel(ops, t1, t2, t3, source)
    sync = [ops * (t1 + t2 + t3) * f for f in SPREAD]
    asyn = [model.async_pipeline * f for f in SPREAD]
    return SyncAsyncResult(mm("sync", sync), mm("async", asyn), model, trace, trace, ops, numel, "cuda",
                           "NVIDIA H200", False, cpu_sync=_cuda_cpu(sum(sync)), cpu_async=_cuda_cpu(sum(asyn)))


# -- G3: backlog by the kernel's start, not its launch ------------------------------------------------------
def test_a_gpu_kernel_launched_before_the_previous_ended_is_not_backlogged_while_the_gpu_idles(tmp_path):
    # 2 µs kernels launched every 8 µs: each launch begins before the previous kernel ends (a kernel starts
    # 25 µs after its launch), yet the GPU idles three quarters of the time
    t2, source = backend_pace(C.increments(tmp_path, ops=200, launch_us=8, kernel_us=2))
    assert source == "op duration" and t2 == pytest.approx(2e-6)
    assert CostModel(200, 8e-6, t2, 15e-6, source).bottleneck == "frontend"


def test_a_gpu_that_falls_behind_runs_at_its_kernels_pace(tmp_path):
    t2, source = backend_pace(C.increments(tmp_path, ops=200, launch_us=5, kernel_us=50))
    assert source == "backend pace" and t2 == pytest.approx(50e-6)
    t2, source = backend_pace(C.increments(tmp_path, ops=1300, launch_us=5, kernel_us=50, queue_cap=1024))
    assert source == "backend pace" and t2 == pytest.approx(50e-6)


def test_kernels_just_longer_than_the_launch_gap_but_not_queued_are_not_backlogged(tmp_path):
    # 2 µs kernels launched every 5 µs start 3 µs apart (within a back-to-back gap), but each waited only for
    # its own launch: the GPU's pace is not what separates them
    t2, source = backend_pace(C.increments(tmp_path, ops=200, launch_us=5, kernel_us=2))
    assert source == "op duration" and t2 == pytest.approx(2e-6)


# -- G4: the launch cost is the CPU's time per op -------------------------------------------------------------
def test_the_launch_cost_is_the_cpus_time_per_op_not_the_launch_call(tmp_path):
    from d2l_async.experiments._cuda_why import cuda_facts, why_not_ahead

    # a @ a: 15 µs of CPU per op, 3 µs of it in cudaLaunchKernel, 12 µs kernels: launch-bound
    f = cuda_facts(C.increments(tmp_path, ops=100, launch_us=15, call_us=3, kernel_us=12))
    assert f.launch_s == pytest.approx(15e-6) and f.launch_call_s == pytest.approx(3e-6)
    why = why_not_ahead(f)
    assert "launch latency" in why and "another process" not in why


def test_the_cpus_time_per_op_leaves_out_waits_for_a_queue_slot(tmp_path):
    from d2l_async.experiments._cuda_why import cuda_facts

    f = cuda_facts(C.increments(tmp_path, ops=1300, launch_us=5, kernel_us=50, queue_cap=1024))
    assert f.slow_launches > 100 and f.launch_s == pytest.approx(5e-6, rel=0.05)


# -- G2: which side is slower, from launches and kernels ----------------------------------------------------
def test_the_gpu_is_the_slower_side_when_its_kernels_outlast_the_launches(tmp_path):
    trace = C.increments(tmp_path, ops=1300, launch_us=5, kernel_us=50, queue_cap=1024)
    r = _result(trace, 1300, t1=5e-6)
    assert r.slower_side()[0] == "backend"
    q = r.queue_lesson()
    assert q.holds is True and "GPU" in q.name, (q.name, q.shown)
    costs = r.costs
    assert costs.backend == "cuda" and costs.clock == "trace per op"
    assert costs.frontend_s == pytest.approx(5e-6, rel=0.05) and costs.backend_s == pytest.approx(50e-6)


def test_the_cpu_is_the_slower_side_when_kernels_are_shorter_than_launches(tmp_path):
    r = _result(C.increments(tmp_path, ops=300, launch_us=8, kernel_us=2), 300, t1=8e-6)
    assert r.slower_side()[0] == "frontend"
    q = r.queue_lesson()
    assert q.holds is True and "CPU" in q.name, (q.name, q.shown)


# -- G1: t2's share of an op is the GPU's time per kernel -------------------------------------------------------
def _sweep(tmp_path, kernels_us, *, t1=5e-6, t3=15e-6):
    pts = []
    for numel, k in zip((1, 10**4, 10**6, 10**7), kernels_us):
        r = _result(C.increments(tmp_path, ops=200, launch_us=5, kernel_us=k), 200, t1=t1, t3=t3, numel=numel)
        pts.append(SweepPoint(200, numel, r.sync.median, r.async_.median, r.model, r.cpu_sync, r.cpu_async))
    return SyncAsyncSweep(tuple(pts), "cuda", "NVIDIA H200", False)


def test_t2s_share_on_a_gpu_is_read_from_its_kernels_not_the_cpu_clock(tmp_path):
    sweep = _sweep(tmp_path, (2, 20, 100, 300))
    assert sweep.points[-1].model.t2 == pytest.approx(300e-6)
    shares = [t2_share(p, "cuda")[0] for p in sweep.points]
    assert shares == sorted(shares) and shares[-1] > 0.9  # 300 µs of GPU against 20 µs of launch and round trip


def test_the_engines_sweep_still_reads_t2s_share_from_the_cpu_clock():
    p = SimpleNamespace(model=CostModel(100, 5e-6, 5e-6, 10e-6), cpu_sync=CpuTimes(1.0, 0.25, 1.0))
    assert t2_share(p, "engine") == (pytest.approx(0.75), "CPU time of the synchronous runs: workers / (frontend + workers)")
    assert t2_share(p, "cuda")[0] == pytest.approx(0.25)


def test_the_engines_sides_are_its_frontend_thread_and_workers_on_the_cpu_clock():
    r = SimpleNamespace(backend="engine", ops=100, async_=SimpleNamespace(raw=(1.0, 1.0)), model=CostModel(100, 1, 2, 3),
                        cpu_async=CpuTimes(2.0, 0.2e-3, 2.2e-3))
    c = side_costs(r)
    assert (c.clock, c.frontend_s, c.backend_s, c.slower) == ("CPU per op", pytest.approx(1e-6),
                                                             pytest.approx(10e-6), "backend")


# -- G5: whether z waited behind the chain, from the trace -----------------------------------------------------
def _barriers(t, *, narrow, full):
    from d2l_async.experiments import barriers

    return barriers.BarrierResult(
        waitall_wait=full, wait_to_read_wait=narrow, waitall_total=3e-3, wait_to_read_total=3e-3,
        trace_waitall=t, trace_wait_to_read=t, long_ops=8, size=4096, follow_ops=8, backend="cuda",
        device="NVIDIA H200", virtual=False, barrier_names=("torch.cuda.synchronize(device)", "event.synchronize() after z"),
        waitall_next=full + 10e-6, wait_to_read_next=narrow + 10e-6,
        waitall_next_runs=tuple((full + 10e-6) * f for f in SPREAD),
        wait_to_read_next_runs=tuple((narrow + 10e-6) * f for f in SPREAD))


def test_barriers_on_cuda_say_the_chain_had_ended_when_z_found_an_idle_gpu(tmp_path):
    from d2l_async.experiments import barriers

    t = C.barrier_run(tmp_path, product_us=2, z_after_chain=True)
    sooner = barriers.checks(_barriers(t, narrow=30e-6, full=31e-6))[0]
    assert sooner.holds is False
    assert "multiprocessors" not in sooner.otherwise and "before z was even launched" in sooner.otherwise
    from d2l_async.experiments._cuda_why import z_wait

    w = z_wait(t)
    assert w is not None and w.chain_ops == 8 and w.chain_done_first and not w.z_held_back


def test_barriers_on_cuda_name_the_sms_only_when_z_was_held_back(tmp_path):
    from d2l_async.experiments._cuda_why import z_wait

    beside, behind = z_wait(C.barrier_run(tmp_path)), z_wait(C.barrier_run(tmp_path, z_behind=True))
    assert beside.z_beside_chain and not beside.z_held_back and not beside.chain_done_first
    assert behind.z_held_back and behind.z_delay > 100e-6


# -- G10 and G6: blockers on CUDA ------------------------------------------------------------------------------
def _blockers(tmp_path, *, product, item=1.05, conv_step=30e-6):
    from d2l_async._machine import Machine
    from d2l_async.experiments import blockers as B

    base = mm("no blocker", [8e-6, 8.1e-6, 8.2e-6])
    per = {k: mm(k, [conv_step, conv_step * 1.01, conv_step * 1.02]) for k in B.BLOCKERS}
    m = Machine(16.0, 16, None, 16, 0.5, 2**37, None, ("NVIDIA H200",), busy_cpus=0.2)
    return B.BlockersResult(per, base, {"asnumpy": mm("a", [product * f for f in SPREAD]),
                                        "item": mm("i", [product * item * f for f in SPREAD])},
                            mm("every", [2e-3 * f for f in SPREAD]), mm("once", [1e-3 * f for f in SPREAD]), (),
                            C.blocker_demo(tmp_path), 1000, 500, "cuda", "NVIDIA H200", False, m)


def test_item_is_described_as_a_copy_into_pinned_memory(tmp_path):
    from d2l_async.experiments import blockers as B

    item_vs = B.checks(_blockers(tmp_path, product=1.3e-3, item=0.12))[0]  # asnumpy copies the whole matrix
    assert item_vs.holds is False and item_vs.cause == "gpu"
    assert "pinned" in item_vs.otherwise and "pageable" in item_vs.otherwise


# -- G2: notebook 05b's queue checks for a CUDA run --------------------------------------------------------
def test_notebook_05b_queue_checks_name_the_gpus_launches_and_kernels_not_cpu_workers(tmp_path):
    small = _result(C.increments(tmp_path, ops=300, launch_us=8, kernel_us=2), 300, t1=8e-6)
    big = _result(C.increments(tmp_path, ops=1300, launch_us=5, kernel_us=50, queue_cap=1024), 1300, t1=5e-6,
                  numel=100_000)
    for r, side in ((small, "frontend"), (big, "backend")):
        assert r.slower_side()[0] == side
        c = r.queue_lesson()
        assert c.claim == "05b.queue" and c.holds is not None
        words = f"{c.name} {c.shown} {c.otherwise} {c.detail}"
        assert "workers" not in words and "CPU clock" not in words, words  # no worker thread computes on a GPU
        assert "the GPU's kernels" in c.detail, c.detail


def test_a_cuda_trace_with_one_launch_falls_back_to_the_issue_loops_time_per_op(tmp_path):
    r = _result(C.increments(tmp_path, ops=1, launch_us=8, kernel_us=2), 1, t1=8e-6)
    c = r.costs
    assert c.frontend_s == pytest.approx(8e-6) and c.clock.startswith("wall-time t1")
    assert r.queue_lesson().name  # decided, not a crash on a NaN
