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
    # the deadline covers the ranks' start too (a fork server importing torch): at load 9 on 2 CPUs that
    # alone took over 3 s, so the limit grows with the load, as the browser tests' waits do
    from d2l_async.devices import machine

    m = machine(sample_s=0)
    limit = 3 * min(5.0, max(1.0, m.load_avg / max(m.usable_cpus, 1.0)))
    t0 = time.perf_counter()
    with pytest.raises(RankTimeout) as info:
        launch(_fns.sleeping_rank, 2, profile=False, timeout=limit, on_start=pids.extend)
    assert time.perf_counter() - t0 < limit + 10
    assert len(pids) == 2 and not any(alive(p) for p in pids)
    # the hung ranks by number and process, in the fields and in the message a reader sees
    assert info.value.ranks == (0, 1) and info.value.pids == tuple(pids)
    assert all(f"rank {r} (pid {pid})" in str(info.value) for r, pid in zip((0, 1), pids))


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


# -- the right rank blamed, unpicklable values, deadlines at start-up, killed launchers ------
def test_a_rank_that_segfaults_is_named_with_its_signal_not_its_survivor(pids):
    from d2l_async.distributed._launch import RankDied

    with pytest.raises(RankDied) as info:
        launch(_fns.segfaulting_rank, 2, profile=False, timeout=90, on_start=pids.extend)
    err = info.value
    assert err.rank == 1 and err.exitcode == -signal.SIGSEGV
    assert "rank 1" in str(err) and "SIGSEGV" in str(err)
    assert not any(alive(p) for p in pids)


def test_an_unpicklable_result_is_reported_as_such(pids):
    with pytest.raises(RankError, match="cannot be pickled") as info:
        launch(_fns.unpicklable_rank, 2, profile=False, timeout=90, on_start=pids.extend)
    assert info.value.exc_type == "TypeError" and "unpicklable_rank" in str(info.value)
    assert not any(alive(p) for p in pids)


def test_a_start_that_outlasts_the_deadline_ends_at_the_deadline(monkeypatch, pids):
    """The first start of the fork server (tens of seconds at load 15) cannot be interrupted inside
    Process.start; launch waits for it in ticks and keeps its deadline."""
    from d2l_async.distributed import _launch

    gate = threading.Event()

    class SlowProcess:  # a start that takes as long as a first fork-server start on a busy machine
        def __init__(self, *a, **k):
            self.pid, self.exitcode = None, None

        def start(self):
            gate.wait(60)

        def is_alive(self):
            return False

        def join(self, timeout=None):
            pass

    class Ctx:
        Process = SlowProcess

        @staticmethod
        def Queue():
            import multiprocessing

            return multiprocessing.get_context("spawn").Queue()

    monkeypatch.setattr(_launch, "_context", lambda method="auto": Ctx)
    monkeypatch.setattr(_launch, "_stop_fork_server", gate.set)  # what frees a blocked start
    t0 = time.perf_counter()
    with pytest.raises(RankTimeout, match="did not start within 2 s"):
        launch(_fns.rank_info, 2, profile=False, timeout=2)
    took = time.perf_counter() - t0
    assert 2 <= took < 2 + 5, took
    assert gate.is_set()


LAUNCHER = r"""
import json, os, sys
from multiprocessing import forkserver
from d2l_async.distributed import launch
from tests.distributed import _fns

def started(pids):
    server = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    print(json.dumps({"ranks": list(pids), "server": server if sys.argv[1] != "spawn" else None}), flush=True)

launch(_fns.sleeping_rank, 2, profile=False, timeout=600, on_start=started, start_method=sys.argv[1])
"""


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_ranks_and_the_fork_server_die_with_a_killed_launcher(method, pids):
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, method], cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # once every rank has started (the test's 120 s timeout bounds it)
        assert line, "the launcher printed nothing"
        started = json.loads(line)
        children = started["ranks"] + ([started["server"]] if started["server"] else [])
        pids.extend(children)
        assert all(alive(p) for p in children)
        proc.kill()  # SIGKILL: no finally, no atexit runs in the launcher
        proc.wait(10)
        end = time.monotonic() + 5.0
        while any(alive(p) for p in children) and time.monotonic() < end:
            time.sleep(0.05)
        assert not [p for p in children if alive(p)], f"still alive 5 s after the launcher was killed: {children}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
