"""The frontend's OpenMP threads are freed while a block is open (d2l_async.torch_async._openmp).

Each check runs in a fresh interpreter: which threads exist is a property of the whole process,
and another test's blocks and pools must not count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

from d2l_async.torch_async import AsyncRuntime, asynchronous
from d2l_async.torch_async._openmp import _pause_function, free_frontend_team, others_runnable, should_free

from .helpers import WAIT

_PROBE = textwrap.dedent("""
    import json, os, sys, torch
    from d2l_async.torch_async import asynchronous, synchronize
    torch.set_num_threads(2)
    tids = lambda: set(os.listdir("/proc/self/task"))
    x = torch.randn(512, 512)
    before = tids()
    eager = torch.relu(x)  # a parallel kernel: the frontend's OpenMP team starts
    team = sorted(tids() - before)
    with asynchronous(free_frontend_team=FREE) as rt:
        inside = tids()
        y = torch.relu(x)
        synchronize()
        during = tids()
    again = torch.relu(x)  # after the block: the frontend's next parallel kernel
    print(json.dumps({"team": team, "freed": rt.frontend_team_freed, "meta": rt.trace().meta["frontend_team_freed"],
                      "gone_at_open": not set(team) & inside, "gone_during": not set(team) & during,
                      "team_again": len(tids() - during) > 0 or len(tids()) > len(inside),
                      "equal": bool(torch.equal(y, eager)) and bool(torch.equal(again, eager))}))
""")


def _probe(free: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE.replace("FREE", str(free))], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


needs_libgomp = pytest.mark.skipif(_pause_function() is None,
                                   reason="torch here uses no GNU libgomp (or not Linux): nothing is freed")


@needs_libgomp
def test_the_frontend_team_is_freed_while_the_block_is_open_and_comes_back_after():
    got = _probe(True)
    if not got["team"]:
        pytest.skip("this torch started no OpenMP thread for a 512 x 512 relu")
    assert got["freed"] and got["meta"]
    assert got["gone_at_open"] and got["gone_during"]  # the worker's kernel did not start it again
    assert got["team_again"]
    assert got["equal"]  # same thread counts: bitwise eager, in the block and after it


@needs_libgomp
def test_free_frontend_team_false_leaves_the_team_alone():
    got = _probe(False)
    if not got["team"]:
        pytest.skip("this torch started no OpenMP thread for a 512 x 512 relu")
    assert not got["freed"] and not got["meta"]
    assert not got["gone_at_open"] and not got["gone_during"]
    assert got["equal"]


def test_nothing_is_freed_for_single_threaded_workers():
    # a worker with one torch thread makes no team of its own: the frontend's costs it nothing
    with asynchronous(torch_threads=1) as rt:
        y = torch.ones(3) + 1
    assert rt.frontend_team_freed is False
    assert y.tolist() == [2.0, 2.0, 2.0]


def test_without_libgomp_nothing_is_done(monkeypatch):
    import d2l_async.torch_async._openmp as omp
    monkeypatch.setattr(omp, "_FOUND", [None])
    assert free_frontend_team() is False


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_free_frontend_team_must_be_a_bool(bad):
    with pytest.raises(TypeError, match="free_frontend_team"):
        asynchronous(free_frontend_team=bad)  # at once, as for a decorator
    with pytest.raises(TypeError, match="free_frontend_team"):
        AsyncRuntime(free_frontend_team=bad)


@pytest.mark.parametrize("setting,threads,cpus,others,freed", [
    ("auto", 2, 2, 0, True),     # an idle 2-core machine: the freed team spins, 10x faster kernels
    ("auto", 2, 2, 1, False),    # one other runnable task: a freed team is the slow one (20-100x)
    ("auto", 2, 2, None, False),  # unknown (no /proc): kept, the cheap mistake
    ("auto", 1, 2, 0, False),    # one torch thread makes no team: nothing to gain
    ("auto", 8, 16, 8, True),
    ("auto", 8, 16, 9, False),
    (True, 2, 2, 5, True),       # forced, whatever the load
    (False, 2, 2, 0, False),
])
def test_the_frontend_team_is_freed_only_when_the_cpus_are_otherwise_idle(setting, threads, cpus, others, freed):
    assert should_free(setting, threads, cpus, others) is freed


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="reads the run queue from /proc")
def test_a_busy_process_counts_as_load_and_our_own_threads_do_not():
    assert others_runnable() is not None
    spin = threading.Event()

    def own_spinner() -> None:  # this process's own running thread: not load
        while not spin.is_set():
            pass
    t = threading.Thread(target=own_spinner, name="test own spinner", daemon=True)
    busy = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
    try:
        t.start()
        deadline = time.monotonic() + WAIT
        while (others_runnable() or 0) < 1 and time.monotonic() < deadline:  # the child is starting
            time.sleep(0.01)
        samples = [others_runnable() for _ in range(20)]
        assert min(samples) >= 1, samples  # the busy process is always runnable
        with asynchronous(torch_threads=2) as rt:  # the default decides beside it: the team is kept
            y = torch.ones(3) + 1
        assert rt.others_runnable >= 1 and rt.frontend_team_freed is False
        assert rt.trace().meta["others_runnable_at_open"] == rt.others_runnable
        assert y.tolist() == [2.0, 2.0, 2.0]
    finally:
        spin.set()
        busy.kill()
        busy.wait(timeout=WAIT)
        t.join(timeout=WAIT)
