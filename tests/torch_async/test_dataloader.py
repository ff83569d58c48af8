"""``DataLoader(num_workers=N)`` iterated inside a block: eager's batches, no hang, no orphan.

Its workers are forked processes.  A fork copies only the thread that forks: the block's worker
threads are not in the child, so an op queued there would never run.  The child's blocks are
closed (ops run eagerly on the data), and the parent first runs what it queued (a dataset made in
the block has its data by then).  Each case runs in a fresh interpreter with a deadline, its
process group killed after it: a hang fails the test instead of the run.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from .helpers import WAIT, run_isolated

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="DataLoader workers are forked on POSIX only")

_CASES = """
    import json, torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    from d2l_async.torch_async import asynchronous, make_async

    def data():
        torch.manual_seed(0)
        return TensorDataset(torch.randn(40, 3) * 2, torch.arange(40))

    def batches(ds, workers):
        g = torch.Generator().manual_seed(1)
        return [[X.tolist(), y.tolist()] for X, y in DataLoader(ds, batch_size=8, shuffle=True, generator=g,
                                                                    num_workers=workers)]

    def train(wrap):
        torch.manual_seed(0)
        ds = TensorDataset(torch.randn(64, 6), torch.randint(0, 3, (64,)))
        net = wrap(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)))
        opt = torch.optim.Adam(net.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(1)
        losses = []
        for epoch in range(2):
            for X, y in DataLoader(ds, batch_size=16, shuffle=True, generator=g, num_workers=2):
                opt.zero_grad()
                loss = nn.functional.cross_entropy(net(X), y)
                loss.backward()
                opt.step()
                losses.append(loss.detach())
        return [float(v) for v in losses]

    expected = batches(data(), 0)
    got = {}
    for workers in (1, 2):
        ds = data()
        with asynchronous(workers=workers):
            got[f"dataset made outside, {workers} worker(s)"] = batches(ds, 2) == expected
        with asynchronous(workers=workers):
            ds = data()  # queued: the fork waits for it
            got[f"dataset made inside, {workers} worker(s)"] = batches(ds, 2) == expected
    losses = train(lambda m: m)
    with asynchronous():
        got["training loop, make_async"] = train(make_async) == losses
    print(json.dumps(got))
"""


def test_worker_processes_load_eagers_batches_inside_a_block():
    out = run_isolated(_CASES, timeout=150)
    got = json.loads(out.strip().splitlines()[-1])
    assert got == {k: True for k in got} and len(got) == 5, got


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc to see the workers")
def test_no_worker_outlives_a_killed_parent():
    """SIGKILL the parent mid-epoch: its DataLoader workers notice (torch's own watchdog checks the
    parent every 5 s) and exit -- before, they were stuck on an op queued for no thread.

    The parent is killed only once each worker has sent a batch.  torch's watchdog records the
    parent's pid when the worker's loop starts: a worker still starting when the parent dies (under
    load) records its new parent and never exits, in plain torch too -- not the block's doing."""
    code = textwrap.dedent("""
        import json, os, sys, time, torch
        from torch.utils.data import DataLoader, TensorDataset
        from d2l_async.torch_async import asynchronous
        ds = TensorDataset(torch.randn(400, 3))
        with asynchronous():
            it = iter(DataLoader(ds, batch_size=4, num_workers=2))
            next(it), next(it)  # a batch from each worker: both are in the loop that watches the parent
            print(json.dumps([w.pid for w in it._workers]), flush=True)
            time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        line = _read_line(proc, WAIT * 3)
        assert line, "no batch arrived: the parent never got past next(iter(loader))"
        pids = json.loads(line)
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        proc.kill()
        proc.wait(timeout=WAIT)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(p) for p in pids), "a DataLoader worker outlived its parent by 30 s"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    """The child's first stdout line, or "" after ``timeout`` seconds (no blocking read forever)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if sel.select(timeout):
            return proc.stdout.readline().strip()
        return ""
    finally:
        sel.close()
