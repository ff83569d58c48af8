"""Training runs ahead: optimizer steps, ``zero_grad`` (and the profiler
markers around them), schedulers and gradient clipping are queued like any op -- a training
loop queues every step while the worker is held, and its losses are eager's, bitwise."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

from d2l_async.torch_async import asynchronous, make_async

from .helpers import WAIT, blocks, train_steps

OPTIMIZERS = {
    "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01),
    "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=0.01, foreach=True),
    "adamw-loop": lambda ps: torch.optim.AdamW(ps, lr=0.01, foreach=False),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=0.01),
}


class _Blocked:
    """An observer: did the frontend wait for anything?  (It releases the gate if it did, so a
    failing test fails instead of hanging.)"""

    hooks = frozenset({"on_block_begin"})

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.reasons: list[str] = []

    def on_block_begin(self, reason: str, t: float, source) -> None:
        self.reasons.append(reason)
        self.gate.set()


def _loop(net, opt, sched, X, y, steps):
    return train_steps(net, opt, X, y, steps, clip=0.5, sched=sched)


def _model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_training_loop_is_queued_while_the_worker_is_held(name):
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(8, 12, generator=g), torch.randint(0, 5, (8,), generator=g)
    net = _model()
    opt = OPTIMIZERS[name](net.parameters())
    expected = [float(v) for v in _loop(net, opt, torch.optim.lr_scheduler.StepLR(opt, 2, 0.5), X, y, 4)]
    with asynchronous() as rt:
        net = make_async(_model())
        opt = OPTIMIZERS[name](net.parameters())
        sched = torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)
        gate = threading.Event()
        from d2l_async.engine._op import EngineOp
        rt.submit(EngineOp("gate", "op", lambda op: gate.wait(WAIT), None, None, (), (), rt._dev, 0, None))
        seen = _Blocked(gate)
        rt.set_observers((*rt._observers, seen))
        losses = _loop(net, opt, sched, X, y, 4)  # every step queued behind the gate
        queued = rt.statistics().pending
        waited = list(seen.reasons)
        gate.set()
        got = [float(v) for v in losses]
    assert waited == [], f"the loop waited for: {waited}"
    assert queued > 40
    assert got == expected
    assert not any(r.startswith("_record_function") for r, _ in blocks(rt))
