"""Shared helpers of the plain-torch tests: hold the worker (deterministic races), the slow profile."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from d2l_async.engine._op import EngineOp

WAIT = 20.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository

#: Slow tests run with ``HYPOTHESIS_PROFILE=slow`` (or ``-m slow`` and ``D2L_ASYNC_SLOW=1``).
SLOW = os.environ.get("HYPOTHESIS_PROFILE") == "slow" or os.environ.get("D2L_ASYNC_SLOW") == "1"


def slow(fn):
    """Mark a test slow and skip it unless the slow profile is on."""
    return pytest.mark.slow(pytest.mark.skipif(not SLOW, reason="slow profile: HYPOTHESIS_PROFILE=slow")(fn))


def run_isolated(code: str, timeout: float = 120) -> str:
    """Run ``code`` in a fresh interpreter; a crash (segfault) fails the test with its output, a hang
    after ``timeout`` seconds too (the whole process group is killed: forked children included)."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=ROOT)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise AssertionError(f"no exit after {timeout} s (killed)\n{stdout}\n{stderr[-3000:]}") from None
    assert proc.returncode == 0, f"exit code {proc.returncode}\n{stdout}\n{stderr[-3000:]}"
    return stdout


def hold(rt) -> threading.Event:
    """Queue an op that keeps the (single) worker busy until the returned event is set: every op
    queued after it is then certainly still pending."""
    ev = threading.Event()
    op = EngineOp("gate", "op", lambda op: ev.wait(WAIT), None, None, (), (), rt._dev, 0, None)
    rt.submit(op)
    return ev


class _ReleaseOnBlock:
    """An observer that opens the gate when the frontend starts to wait (no sleeps, no timers)."""

    hooks = frozenset({"on_block_begin"})

    def __init__(self, ev: threading.Event) -> None:
        self.ev = ev

    def on_block_begin(self, reason: str, t: float, source) -> None:
        self.ev.set()


def hold_until_blocked(rt) -> threading.Event:
    """:func:`hold`, released by the frontend's next wait."""
    ev = hold(rt)
    rt.set_observers((*rt._observers, _ReleaseOnBlock(ev)))
    return ev


def blocks(rt) -> list[tuple[str, str]]:
    df = rt.trace().to_frame()
    df = df[df["kind"] == "block"]
    return list(zip(df["reason"], df["source"]))


class CpuHog:
    """Busy threads in a subprocess-free way: Python loops that keep the GIL and a CPU busy
    (for the 30-repeat race tests of the slow profile)."""

    def __init__(self, n: int = 2) -> None:
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._spin, name=f"test hog {k}", daemon=True) for k in range(n)]

    def _spin(self) -> None:
        import torch
        a = torch.randn(200, 200)
        while not self.stop.is_set():
            a @ a

    def __enter__(self) -> "CpuHog":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=WAIT)


def train_steps(net, opt, X, y, steps: int, *, clip: float | None = None, sched=None) -> list:
    """The book's training loop: ``steps`` SGD-style steps of cross-entropy on ``(X, y)`` (gradients
    clipped to ``clip`` and the scheduler stepped when given); the detached losses, not yet read."""
    from torch import nn

    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(X), y)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(net.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.detach())
    return losses


def outcome(losses: list, net) -> tuple[list[float], list[bytes]]:
    """What a run is compared by, bitwise: its losses and the bytes of every parameter."""
    return [float(v) for v in losses], [p.detach().numpy().tobytes() for p in net.parameters()]
