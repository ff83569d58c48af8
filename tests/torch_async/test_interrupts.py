"""An exception that ends a block leaves no silent value (d2l_async.torch_async._interrupt).

Each exception the issue names -- a KeyboardInterrupt, a Python error, a queued op's error raised
at a blocking point -- ends a block whose worker is held (a gate op), so ops are certainly still
queued when it leaves; afterwards every tensor holds eager torch's value at the line that raised,
bitwise, or raises an error that names the block and the op.  A second Ctrl-C while the queued ops
run abandons them.  The real signals at random moments are in :mod:`.interrupt_runner` (a process
of its own: a Ctrl-C that escaped would end this test run).
"""

from __future__ import annotations

import _thread
import json
import os
import signal
import threading
import time

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from d2l_async.torch_async import NotComputedError, asynchronous, make_async, synchronize
from d2l_async.torch_async import _interrupt

from .helpers import SLOW, WAIT, hold, hold_until_blocked, run_isolated


def _state(net, opt) -> list[tuple[str, bytes]]:
    """Every parameter and Adam tensor, as bytes (reading them after the block)."""
    out = []
    for name, p in net.named_parameters():
        out.append((name, p.detach().numpy().tobytes()))
        for key, v in sorted(opt.state.get(p, {}).items()):
            out.append((f"{name}.{key}", v.detach().numpy().tobytes()))
    return out


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _step(net, opt, X, Y, k):
    loss = F.mse_loss(net(X[k]), Y[k])
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def _data(steps=8):
    g = torch.Generator().manual_seed(1)
    return torch.randn(steps, 5, 6, generator=g), torch.randn(steps, 5, 3, generator=g)


def _eager_after(k):
    X, Y = _data()
    net = _model()
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    for i in range(k):
        _step(net, opt, X, Y, i)
    return _state(net, opt)


class _Raise(Exception):
    pass


def _hold_until_blocked(rt) -> None:
    """Every worker held until the frontend's next wait (the end of the block)."""
    for _ in range(rt.workers):
        hold_until_blocked(rt)


def _hold(rt) -> list[threading.Event]:
    return [hold(rt) for _ in range(rt.workers)]


def _release(gates: list[threading.Event]) -> None:
    for g in gates:
        g.set()


# -- the exception ends the block: the queued ops run first -------------------------------------
@pytest.mark.parametrize("workers", [1, 2])
def test_increments_queued_before_a_keyboard_interrupt_all_run(workers):
    """``x += 1`` 2,000 times, then Ctrl-C: x is 2,000 (it was 46, 50 or 171: the queue was dropped)."""
    with pytest.raises(KeyboardInterrupt) as info:
        with asynchronous(workers=workers) as rt:
            _hold_until_blocked(rt)  # the workers start when the block's end waits: all 2,000 are queued
            x = torch.zeros(3)
            for _ in range(2000):
                x += 1
            queued = rt.statistics().pending
            raise KeyboardInterrupt
    assert queued > 2000
    assert x.tolist() == [2000.0, 2000.0, 2000.0]
    assert rt.closed and rt.statistics().pending == 0 and rt.statistics().done >= 2000
    assert any(f"{queued:,} queued op(s) ran first" in n for n in info.value.__notes__)


@pytest.mark.parametrize("build", ["inside", "make_async"])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("error", [KeyboardInterrupt, _Raise])
def test_a_training_loop_ended_by_an_exception_holds_eagers_state_bitwise(workers, build, error):
    """Adam, 5 steps queued behind a held worker, then an exception: parameters, moments and step
    count are eager's after 5 steps (they were step 2's parameters beside ``step`` = 6)."""
    X, Y = _data()
    net = _model() if build == "make_async" else None
    with pytest.raises(error):
        with asynchronous(workers=workers) as rt:
            _hold_until_blocked(rt)
            if net is None:
                net = _model()
            else:
                make_async(net)
            opt = torch.optim.Adam(net.parameters(), lr=0.1)
            for k in range(5):
                _step(net, opt, X, Y, k)
            assert rt.statistics().pending > 100  # nothing ran yet
            raise error
    assert _state(net, opt) == _eager_after(5)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_deferred_op_error_ends_the_block_and_the_rest_runs(workers):
    """A queued op fails (an index out of range, found only when it runs) and its error is raised
    at ``.item()``: the ops independent of it still ran (the counter is eager's), and what depends
    on it -- the parameters the step after it updated -- raises that op's own error when read."""
    torch.manual_seed(0)
    emb = nn.Embedding(4, 2)
    opt = torch.optim.SGD(emb.parameters(), lr=0.1)
    idx = torch.tensor([[0, 1], [2, 3], [1, 9]])  # step 2 reads row 9 of 4
    with pytest.raises(IndexError) as info:
        with asynchronous(workers=workers) as rt:
            gates = _hold(rt)
            make_async(emb)
            count = torch.zeros(())
            for k in range(3):
                loss = emb(idx[k]).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                count += 1  # independent of the failing op
            for _ in range(50):
                count += 1
            _release(gates)
            loss.item()  # the blocking point where the worker's IndexError surfaces
    assert "index" in str(info.value).lower()
    assert count.item() == 53.0
    with pytest.raises(IndexError):
        emb.weight.sum().item()  # written by a step that read the failed gradient: its error, again


def test_the_ops_that_fail_while_the_block_ends_are_named_in_the_note():
    with pytest.raises(_Raise) as info:
        with asynchronous() as rt:
            hold_until_blocked(rt)
            bad = torch.multinomial(torch.tensor([-1.0, 2.0]), 1)  # fails when it runs
            raise _Raise
    assert any("some of them failed" in n and "RuntimeError" in n for n in info.value.__notes__)
    with pytest.raises(RuntimeError):
        bad.tolist()


def test_a_long_end_says_on_stderr_what_it_waits_for(monkeypatch, capsys):
    monkeypatch.setattr(_interrupt, "QUIET", 0.0)
    with pytest.raises(_Raise):
        with asynchronous() as rt:
            ev = hold(rt)
            threading.Timer(0.2, ev.set).start()  # the worker starts after the end began to wait
            x = torch.ones(2) + 1
            raise _Raise
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("d2l_async:")]
    assert len(lines) == 1 and rt.opened_at in lines[0] and rt.opened_at.startswith("test_interrupts.py:")
    assert x.tolist() == [2.0, 2.0]


# -- a second Ctrl-C abandons the queued ops -----------------------------------------------------
class _InterruptAtEnd:
    """An observer: a second Ctrl-C as the end of the block starts to wait for the queued ops."""

    hooks = frozenset({"on_block_begin"})

    def __init__(self, how: str) -> None:
        self.how = how

    def on_block_begin(self, reason, t, source) -> None:
        if reason == "waitall":
            if self.how == "raise_signal":
                signal.raise_signal(signal.SIGINT)
            else:
                _thread.interrupt_main()


@pytest.mark.parametrize("how", ["raise_signal", "interrupt_main"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_second_ctrl_c_abandons_the_queue_and_every_unwritten_tensor_says_so(workers, how,
                                                                             no_foreign_gc_callbacks):
    X, Y = _data()
    net = _model()
    gates: list[threading.Event] = []
    with pytest.raises(KeyboardInterrupt) as info:
        try:
            with asynchronous(workers=workers) as rt:
                make_async(net)
                opt = torch.optim.Adam(net.parameters(), lr=0.1)
                _step(net, opt, X, Y, 0)
                synchronize(timeout=WAIT)  # step 0 ran: readable afterwards
                gates = _hold(rt)
                for k in range(1, 4):
                    _step(net, opt, X, Y, k)
                fresh = net(X[0])
                rt.set_observers((*rt._observers, _InterruptAtEnd(how)))
                raise KeyboardInterrupt
        finally:
            _release(gates)  # the ops the workers were running (the gates) finish; the workers exit
    assert rt.abandoned == ("KeyboardInterrupt", "KeyboardInterrupt")
    assert any("abandoned" in n for n in info.value.__notes__)
    for t in [fresh, *net.parameters(), *(v for s in opt.state.values() for k, v in s.items() if k != "step")]:
        with pytest.raises(NotComputedError) as err:
            t.sum().item()
        e = err.value
        assert e.block == rt.opened_at and e.block.startswith("test_interrupts.py:")
        assert e.op_id > 0 and e.op and e.source.startswith("test_interrupts.py:")
        assert e.ended_by == "KeyboardInterrupt, then KeyboardInterrupt"
    assert [s["step"].item() for s in opt.state.values()] == [4.0] * 4  # host scalars: program order
    with asynchronous():
        with pytest.raises(NotComputedError):
            make_async(net)  # a new block cannot adopt a parameter that has no value


def test_a_parameter_left_without_a_value_takes_new_data(no_foreign_gc_callbacks):
    net = nn.Linear(2, 2)
    gates: list[threading.Event] = []
    with pytest.raises(KeyboardInterrupt):
        try:
            with asynchronous() as rt:
                make_async(net)
                gates = _hold(rt)
                with torch.no_grad():
                    net.weight.add_(1)
                rt.set_observers((*rt._observers, _InterruptAtEnd("interrupt_main")))
                raise KeyboardInterrupt
        finally:
            _release(gates)
    with pytest.raises(NotComputedError):
        net.weight.tolist()
    net.weight.data = torch.ones(2, 2)
    assert net.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]


# -- a Ctrl-C inside the runtime's bookkeeping -----------------------------------------------------
class _InterruptOnPush:
    """An observer: a Ctrl-C while the ``n``-th op is being pushed (inside the engine's submit)."""

    hooks = frozenset({"on_push"})

    def __init__(self, n: int) -> None:
        self.n = n
        self.pushes = 0

    def on_push(self, op) -> None:
        self.pushes += 1
        if self.pushes == self.n:
            _thread.interrupt_main()
            for _ in range(1000):  # bytecodes: where Python runs the handler, here or just after
                pass


@pytest.mark.parametrize("workers", [1, 2])
def test_a_ctrl_c_in_the_middle_of_a_push_is_raised_after_it(workers, no_foreign_gc_callbacks):
    """Raised half-way through the push (an id taken, the op not queued), it left a one-worker
    block's every later op waiting for that op: the next blocking point waited for ever."""
    done = 0
    with asynchronous(workers=workers) as rt:
        x = torch.zeros(())
        rt.set_observers((*rt._observers, _InterruptOnPush(20)))
        deadline = time.monotonic() + WAIT
        with pytest.raises(KeyboardInterrupt):
            while time.monotonic() < deadline:  # until the postponed Ctrl-C lands (1 ms later)
                x += 1
                done += 1
        y = x * 2  # the block goes on
        synchronize(timeout=WAIT)
        assert x.item() in (done, done + 1)  # the interrupted `x += 1` ran whole, or not at all
        assert y.item() == 2 * x.item()


# -- real SIGINTs at random moments (a process of its own) -----------------------------------------
@pytest.mark.process
def test_real_sigints_at_random_moments_of_a_training_loop_leave_no_silent_value():
    trials = 400 if SLOW else 32
    out = run_isolated(f"""
        import sys
        from tests.torch_async.interrupt_runner import main
        sys.exit(main(["{trials}", "{os.getpid() % 1000}"]))
    """, timeout=600 if SLOW else 300)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    summary = rows[-1]
    assert all(summary["uninterrupted_is_eager"].values()), summary  # else the oracle cannot judge a trial
    trials_rows = [r for r in rows if "outcome" in r]
    assert len(trials_rows) == trials, summary
    silent = [r for r in trials_rows if r["outcome"] in ("silent", "unclear error")]
    assert not silent, silent[:3]
    interrupted = [r for r in trials_rows if r["ended"] == "interrupted"]
    assert len(interrupted) >= trials // 2, summary  # the signals did land in the blocks
    assert {r["workers"] for r in interrupted} == {1, 2} and {r["build"] for r in interrupted} == {
        "inside", "make_async"}
