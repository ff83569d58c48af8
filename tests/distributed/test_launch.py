"""launch(): ranks start, join one process group, report; errors, silent deaths, deadlines and
Ctrl-C end every rank (checked by pid), and a rank's traceback reaches the caller at once."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from d2l_async.distributed import (DistributedError, RankError, RankTimeout, free_port, launch)
from d2l_async.distributed.ranks import raising_rank

from . import _fns
from .conftest import alive

pytestmark = pytest.mark.timeout(120)


def test_ranks_join_one_group_and_report(pids):
    res = launch(_fns.rank_info, 3, profile=False, timeout=90, on_start=pids.extend)
    assert [v["rank"] for v in res.values] == [0, 1, 2]
    assert {v["world"] for v in res.values} == {3}
    assert {v["sum"] for v in res.values} == {0.0 + 1.0 + 2.0}
    assert res.pids == tuple(v["pid"] for v in res.values) == tuple(pids)
    assert res.trace_dir is None and res.backend == "gloo" and res.world_size == 3
    assert not any(alive(p) for p in res.pids)


def test_spawned_ranks_work_too(pids):
    res = launch(_fns.rank_info, 2, profile=False, timeout=90, on_start=pids.extend, start_method="spawn")
    assert {v["sum"] for v in res.values} == {1.0}


def test_a_rank_that_raises_surfaces_with_its_traceback_within_10_s(pids):
    t0 = time.perf_counter()
    with pytest.raises(RankError) as info:
        launch(raising_rank, 3, profile=False, timeout=60, options={"fail_rank": 1}, on_start=pids.extend)
    took = time.perf_counter() - t0
    err = info.value
    assert err.rank == 1 and err.exc_type == "ValueError"
    assert "Traceback" in err.remote_traceback and "raising_rank" in err.remote_traceback
    assert "deliberate error" in str(err) and "rank 1 raised ValueError" in str(err)
    assert 0 <= err.latency_s < 10, f"the error took {err.latency_s:.1f} s from the rank's raise to the caller"
    assert took < 60
    # the two other ranks were blocked in a barrier the failing rank never entered: ended, not waited for
    assert len(pids) == 3 and not any(alive(p) for p in pids)


def test_deadline_ends_every_rank(pids):
    t0 = time.perf_counter()
    with pytest.raises(RankTimeout, match=r"ranks \[0, 1\] did not finish within 3 s"):
        launch(_fns.sleeping_rank, 2, profile=False, timeout=3, on_start=pids.extend)
    assert time.perf_counter() - t0 < 3 + 10
    assert len(pids) == 2 and not any(alive(p) for p in pids)


def test_a_rank_that_dies_silently_is_reported(pids):
    with pytest.raises(DistributedError, match=r"rank 1 \(pid \d+\) exited with code 3 without reporting"):
        launch(_fns.vanishing_rank, 2, profile=False, timeout=60, on_start=pids.extend)
    assert not any(alive(p) for p in pids)


def test_ctrl_c_ends_every_rank(pids):
    def interrupt(started):
        pids.extend(started)
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()

    with pytest.raises(KeyboardInterrupt):
        launch(_fns.sleeping_rank, 2, profile=False, timeout=60, on_start=interrupt)
    assert len(pids) == 2 and not any(alive(p) for p in pids)


def test_each_run_gets_its_own_free_port():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # nobody holds it
    assert 1024 <= port <= 65535


def _local():
    return None


@pytest.mark.parametrize("fn,kwargs,error,match", [
    (lambda ctx: None, {}, ValueError, "top-level function of a module"),
    (_fns.rank_info, {"world_size": 0}, ValueError, "world_size must be an integer"),
    (_fns.rank_info, {"backend": "mpi"}, ValueError, "backend='mpi'"),
    (_fns.rank_info, {"timeout": 0}, ValueError, "timeout must be a positive"),
    (_fns.rank_info, {"start_method": "fork"}, ValueError, "start_method='fork'"),
    ("not a function", {}, TypeError, "expects a function"),
])
def test_bad_arguments_fail_before_any_process_starts(fn, kwargs, error, match):
    with pytest.raises(error, match=match):
        launch(fn, **kwargs)


def test_nested_function_is_refused():
    def inner(ctx):
        return None

    with pytest.raises(ValueError, match="top-level function"):
        launch(inner, 2)


@pytest.mark.skipif(__import__("torch").cuda.device_count() >= 2, reason="this machine has two GPUs")
def test_nccl_without_a_gpu_per_rank_says_so():
    with pytest.raises(ValueError, match="one CUDA GPU per rank"):
        launch(_fns.rank_info, 2, backend="nccl")
