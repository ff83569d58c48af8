"""PyTorch's own optimizer database (``common_optimizers.optim_db``) as a peer suite for ``asynchronous()``.

Run in a subprocess by ``test_common_optimizers.py`` (a crash then names its config)::

    python -m tests.torch_async.optim_runner START STOP [fast]

For each ``OptimizerInfo`` of ``optim_db[START:STOP]``, each of its inputs (``optim_inputs_func``:
lr as a float and as a Tensor, weight decay, momentum, amsgrad, maximize, LBFGS's strong Wolfe,
...) and each implementation it supports on a CPU (the loop, ``foreach=True``, ``fused=True``),
with one of its scheduler lists (``scheduler_inputs``, rotating): three steps of a small model,
eagerly, then inside ``asynchronous()`` with 1 and 2 workers, the model built in the block or
built outside and passed through ``make_async``.  Losses, parameters and the optimizer's state are
compared bitwise.  ``fast``: each optimizer's first input only, one variant (rotating).

Prints ``start NAME`` before each config and one JSON line after it::

    {"config": "Adam[amsgrad, foreach]", "status": "equal" | "differs" | "skipped", "detail": "..."}
"""

from __future__ import annotations

import json
import sys
import warnings

import torch
from torch import nn

from d2l_async.torch_async import asynchronous, make_async

from .opinfo_runner import WAIT, _plain

VARIANTS = [(1, "inside"), (2, "make_async"), (1, "make_async"), (2, "inside")]


def configs(oi) -> list[tuple[int, dict, str]]:
    """``(input index, extra kwargs, label)`` for every implementation the optimizer runs on a CPU."""
    out = []
    for k, inp in enumerate(oi.optim_inputs_func(device="cpu", dtype=torch.float32)):
        out.append((k, {}, inp.desc))
        if "foreach" in oi.supported_impls and "foreach" not in inp.kwargs:
            out.append((k, {"foreach": True}, f"{inp.desc}, foreach"))
        if "fused" in oi.supported_impls and "cpu" in getattr(oi, "supports_fused_on", ()) and \
                "fused" not in inp.kwargs:
            out.append((k, {"fused": True}, f"{inp.desc}, fused"))
    return out


def _model(oi) -> nn.Module:
    torch.manual_seed(0)
    if oi.only_supports_sparse_grads:
        return nn.Embedding(10, 4, sparse=True)
    bias = oi.optim_cls.__name__ != "Muon"  # Muon takes 2-d parameters only
    return nn.Sequential(nn.Linear(4, 5, bias=bias), nn.Tanh(), nn.Linear(5, 2, bias=bias))


def _loss(oi, net) -> torch.Tensor:
    if oi.only_supports_sparse_grads:
        return net(torch.tensor([[1, 2, 4], [4, 3, 9]])).pow(2).sum()
    g = torch.Generator().manual_seed(1)
    X, y = torch.randn(6, 4, generator=g), torch.randn(6, 2, generator=g)
    return (net(X) - y).pow(2).mean()


def run(oi, index: int, extra: dict, build=None) -> tuple:
    """Three steps; ``build``: None (eager), "inside" or "make_async" (inside the current block)."""
    inp = oi.optim_inputs_func(device="cpu", dtype=torch.float32)[index]  # fresh: a Tensor lr is written
    net = _model(oi) if build != "make_async" else make_async(_model(oi))
    opt = oi.optim_cls(net.parameters(), **{**inp.kwargs, **extra})
    lists = oi.scheduler_inputs
    scheds = [f(opt) for f in lists[index % len(lists)]] if lists else []
    losses = []
    for _ in range(3):
        def closure():
            opt.zero_grad()
            loss = _loss(oi, net)
            loss.backward()
            return loss
        if oi.step_requires_closure:
            loss = opt.step(closure)
        else:
            loss = closure()
            opt.step()
        for s in scheds:
            if isinstance(s, torch.optim.lr_scheduler.ReduceLROnPlateau):
                s.step(loss)
            else:
                s.step()
        losses.append(loss.detach())
    state = opt.state_dict()["state"]
    state_values = [state[k][n] for k in sorted(state) for n in sorted(state[k])]
    return (_plain(losses), _plain(list(net.parameters())), _plain(state_values),
            [g["lr"] if not isinstance(g["lr"], torch.Tensor) else _plain(g["lr"]) for g in opt.param_groups])


def check(oi, index: int, extra: dict, variants: list) -> dict:
    try:
        expected = run(oi, index, extra)
    except Exception as exc:  # noqa: BLE001 - a config eager torch refuses here: nothing to compare
        return {"status": "skipped", "detail": f"eager raises {type(exc).__name__}"}
    for workers, build in variants:
        where = f"{workers} worker(s), built {build}"
        try:
            with asynchronous(workers=workers, record=False) as rt:
                got = run(oi, index, extra, build)
                rt.synchronize(timeout=WAIT)
        except Exception as exc:  # noqa: BLE001
            first = str(exc).splitlines()[0][:200] if str(exc) else ""
            return {"status": "differs", "detail": f"{where}: raised {type(exc).__name__}: {first}"}
        for name, a, b in zip(("losses", "parameters", "optimizer state", "learning rates"), got, expected):
            if a != b:
                return {"status": "differs", "detail": f"{where}: {name} differ"}
    return {"status": "equal", "detail": ""}


def main(argv: list[str]) -> None:
    from torch.testing._internal.common_optimizers import optim_db
    start, stop = int(argv[0]), int(argv[1])
    fast = len(argv) > 2 and argv[2] == "fast"
    warnings.simplefilter("ignore")
    for i, oi in enumerate(optim_db[start:stop], start):
        cfgs = configs(oi)[:1] if fast else configs(oi)
        for index, extra, label in cfgs:
            name = f"{oi.optim_cls.__name__}[{label}]"
            print(f"start {name}", flush=True)
            variants = [VARIANTS[i % len(VARIANTS)]] if fast else VARIANTS
            try:
                res = check(oi, index, extra, variants)
            except Exception as exc:  # noqa: BLE001 - the runner's own failure, reported per config
                res = {"status": "differs", "detail": f"runner: {type(exc).__name__}: {exc}"[:300]}
            print(json.dumps({"config": name, "optimizer": oi.optim_cls.__name__, "runs": len(variants), **res}),
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
