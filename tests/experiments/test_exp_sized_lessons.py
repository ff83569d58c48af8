"""The CUDA lessons hold on a fast GPU and a slow one at the sizes the sizing picks, and not at the CPU's sizes
on the fast one.

Each GPU is a handful of public numbers (tests/_gpu_models.py); ``size_for_device`` picks each lesson's size from
what ``measure_device`` would read there; the run at that size is a synthetic capture (tests/_cuda_traces.py)
timed as the experiment times it; the checks are the package's own.  The fast GPU is an H200 whose 1000x1000
product takes 15 µs, about a product's launch of 8 µs.
"""

from __future__ import annotations

import pytest

from d2l_async.experiments import asynchrony as A
from d2l_async.experiments import barriers as Bar
from d2l_async.experiments import blockers as Blk
from d2l_async.experiments.sizing import size_for_device
from d2l_async.experiments.sync_async import SWEEP_NUMELS, SWEEP_NUMELS_QUICK

from .. import _gpu_models as G


def _claim(checks, key: str):
    """The check of the claim ``key`` (see d2l_async.claims) among ``checks``."""
    (found,) = [c for c in checks if c.claim == key]
    return found

#: the engine's defaults, which the CUDA branches used before they were sized (default mode, quick mode)
CPU_SIZES = {"asynchrony": (1000, 400), "notebook_01": (1000, 600), "barriers": (800, 600), "blockers": (1000, 500),
             "sync_async_queue": (100_000, 100_000), "sync_async_sweep": (SWEEP_NUMELS, SWEEP_NUMELS_QUICK)}


@pytest.fixture(params=sorted(G.GPUS), scope="module")
def gpu(request):
    return G.GPUS[request.param]


@pytest.fixture(scope="module")
def sizes(gpu):
    return size_for_device(gpu.times())


def test_every_rule_is_reached_on_both_gpus(gpu, sizes):
    assert sizes.reached, sizes.sentence()
    assert sizes.times.device == gpu.name


def test_01_the_naive_timer_misses_the_products_and_the_cpu_runs_ahead(tmp_path, gpu, sizes):
    timer, ahead = A.checks(G.asynchrony_run(tmp_path, gpu, sizes.asynchrony))
    assert (timer.holds, ahead.holds) == (True, True), (timer.shown, ahead.shown)
    # notebook 01's hand-timed loop: one run each, decided only beyond a factor 2 of the half
    r = G.asynchrony_run(tmp_path, gpu, sizes.asynchrony)
    assert A.timer_check(r.naive.median, r.synced.median, backend="cuda").holds is True


def test_03_the_narrow_wait_is_sooner_and_the_follow_up_runs_beside_the_chain(tmp_path, gpu, sizes):
    sooner, beside = Bar.checks(G.barriers_run(tmp_path, gpu, sizes.barriers))
    assert (sooner.holds, beside.holds) == (True, True), (sooner.shown, beside.shown)


def _conversion_s(gpu) -> float:
    return (gpu.launch_us + gpu.round_trip_us) * 1e-6  # the sizing's conversion: a launch and a round trip


def test_04_the_product_dominates_its_conversion(tmp_path, gpu, sizes):
    # the sizing's rule for 04 (the claim that stated it is gone from the registry: the product's size is
    # what makes each blocker's wait visible in the demo): the product takes 20 conversions or more
    assert gpu.matmul_us(sizes.blockers) * 1e-6 >= 20 * _conversion_s(gpu)
    every_step = _claim(Blk.checks(G.blockers_run(tmp_path, gpu, sizes.blockers)), "04.every-step")
    assert every_step.holds is True, every_step.shown


@pytest.mark.parametrize("ops", [2000, 300], ids=["default", "quick"])
def test_05_the_long_queue_fills_and_the_short_one_does_not(tmp_path, gpu, sizes, ops):
    long_q = G.sync_async_run(tmp_path, gpu, sizes.queue_numel, ops=ops)
    short_q = G.sync_async_run(tmp_path, gpu, 1, ops=ops)
    assert long_q.slower_side()[0] == "backend" and short_q.slower_side()[0] == "frontend"
    assert long_q.queue_lesson().holds is True and short_q.queue_lesson().holds is True
    faster = _claim(short_q.lessons(), "05.async-faster")  # the book's one element: asynchrony wins
    assert faster.holds is True, faster.shown


@pytest.mark.parametrize("quick", [False, True], ids=["default", "quick"])
def test_05_the_sweep_falls_and_t2_takes_over(tmp_path, gpu, sizes, quick):
    numels = sizes.sweep_numels_quick if quick else sizes.sweep_numels
    shrinks = _claim(G.sweep_run(tmp_path, gpu, numels).lessons(), "05b.shrinks")
    assert shrinks.holds is True, shrinks.shown


# -- the CPU's sizes on the fast GPU: the lessons fail for their size ----------------------------------------
@pytest.mark.parametrize("mode", [0, 1], ids=["default", "quick"])
def test_the_cpus_sizes_on_the_fast_gpu_miss_the_lessons(tmp_path, mode):
    gpu = G.H200
    hand = G.asynchrony_run(tmp_path, gpu, CPU_SIZES["notebook_01"][mode])
    assert A.timer_check(hand.naive.median, hand.synced.median, backend="cuda").holds is not True
    sooner, beside = Bar.checks(G.barriers_run(tmp_path, gpu, CPU_SIZES["barriers"][mode]))
    assert sooner.holds is False and beside.holds is False
    assert gpu.matmul_us(CPU_SIZES["blockers"][mode]) * 1e-6 < 20 * _conversion_s(gpu)
    long_q = G.sync_async_run(tmp_path, gpu, CPU_SIZES["sync_async_queue"][mode], ops=300)
    assert long_q.slower_side()[0] != "backend"  # no contrast: both queues stay short
    shrinks = _claim(G.sweep_run(tmp_path, gpu, CPU_SIZES["sync_async_sweep"][mode]).lessons(), "05b.shrinks")
    assert shrinks.holds is not True
    if mode:  # quick mode's 5 products of 400x400: a few µs each, shorter than their launches
        timer, ahead = A.checks(G.asynchrony_run(tmp_path, gpu, CPU_SIZES["asynchrony"][mode], matmuls=5))
        assert timer.holds is not True and ahead.holds is not True


def test_the_slow_gpu_gets_smaller_products_than_the_fast_one():
    fast, slow = size_for_device(G.H200.times()), size_for_device(G.T4.times())
    assert slow.asynchrony < fast.asynchrony and slow.blockers < fast.blockers
    assert slow.queue_numel < fast.queue_numel and slow.sweep_numels[-1] < fast.sweep_numels[-1]
