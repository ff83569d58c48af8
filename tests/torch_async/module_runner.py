"""PyTorch's own module database (``common_modules.module_db``, what torch's ``test_modules.py``
iterates) as a peer suite for ``asynchronous()``.

Run in a subprocess by ``test_common_modules.py`` (a crash then names its module)::

    python -m tests.torch_async.module_runner START STOP [SAMPLES] [fast|NAMES|fast:NAMES]

For each ``ModuleInfo`` of ``module_db[START:STOP]`` that supports float32, its first ``SAMPLES``
module inputs (constructor and forward arguments made by the ModuleInfo itself), in training and
in eval mode: the module is built (seeded), run forward, and its outputs back-propagated (ones),
eagerly, then inside ``asynchronous()`` with 1 and 2 workers, built in the block or built outside
and passed through ``make_async``; forward inputs are made outside.  Outputs, parameter and input
gradients and buffers are compared bitwise (dtype, shape, bytes).  ``fast``: training mode, one
variant per module (rotating); ``NAMES`` (or ``fast:NAMES``): only these modules (comma-separated).

Prints ``start NAME`` before each case and one JSON line after it::

    {"case": "nn.Linear[0, train]", "module": "nn.Linear", "status": "equal" | "differs" | "skipped", ...}
"""

from __future__ import annotations

import json
import sys
import warnings

import torch

from d2l_async.torch_async import asynchronous, make_async

from .opinfo_runner import WAIT, _flat, _map, _plain
from .optim_runner import VARIANTS


def _fresh(x):
    """Forward inputs of one run: copies of the ModuleInput's (their .grad must not accumulate)."""
    return _map(x, lambda t: t.detach().clone().requires_grad_(t.requires_grad) if t.is_leaf else t.detach().clone())


def run(mi, minput, training: bool, build: str | None = None, prebuilt=None) -> tuple:
    """One forward and backward; ``build``: None (eager), "inside" or "make_async"."""
    args, kwargs = _fresh(minput.forward_input.args), _fresh(minput.forward_input.kwargs)
    if prebuilt is None:
        torch.manual_seed(0)
        m = mi.module_cls(*minput.constructor_input.args, **minput.constructor_input.kwargs)
    else:
        m = make_async(prebuilt)
    m.train(training)
    torch.manual_seed(1)  # dropout
    out = m(*args, **kwargs)
    outs = [o for o in _flat(out) if isinstance(o, torch.Tensor) and o.requires_grad]
    grads = None
    if outs:
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
        grads = [p.grad for p in m.parameters()] + [t.grad for t in _flat((args, kwargs))
                                                     if isinstance(t, torch.Tensor) and t.requires_grad]
    return _plain(out), _plain(grads) if grads is not None else None, _plain(list(m.buffers()))


def _build(mi, minput):
    torch.manual_seed(0)
    return mi.module_cls(*minput.constructor_input.args, **minput.constructor_input.kwargs)


def check(mi, minput, training: bool, variants: list) -> dict:
    try:
        expected = run(mi, minput, training)
    except Exception as exc:  # noqa: BLE001 - an input eager torch refuses: nothing to compare
        return {"status": "skipped", "detail": f"eager raises {type(exc).__name__}"}
    for workers, build in variants:
        where = f"{workers} worker(s), built {build}"
        prebuilt = _build(mi, minput) if build == "make_async" else None
        try:
            with asynchronous(workers=workers, record=False) as rt:
                got = run(mi, minput, training, build, prebuilt)
                rt.synchronize(timeout=WAIT)
        except Exception as exc:  # noqa: BLE001
            first = str(exc).splitlines()[0][:200] if str(exc) else ""
            return {"status": "differs", "detail": f"{where}: raised {type(exc).__name__}: {first}"}
        for name, a, b in zip(("outputs", "gradients", "buffers"), got, expected):
            if a != b:
                return {"status": "differs", "detail": f"{where}: {name} differ"}
    return {"status": "equal", "detail": ""}


def main(argv: list[str]) -> None:
    from torch.testing._internal.common_modules import module_db
    start, stop = int(argv[0]), int(argv[1])
    samples = int(argv[2]) if len(argv) > 2 else 3
    mode = argv[3] if len(argv) > 3 else ""
    fast = mode.startswith("fast")
    listed = mode.split(":", 1)[1] if fast and ":" in mode else (mode if not fast else "")
    names = set(listed.split(",")) if listed else None
    warnings.simplefilter("ignore")
    for i, mi in enumerate(module_db[start:stop], start):
        if names is not None and mi.name not in names:
            continue
        if torch.float32 not in mi.dtypes:
            print(json.dumps({"case": mi.name, "module": mi.name, "status": "skipped", "detail": "no float32"}))
            continue
        for training in ((True,) if fast else (True, False)):
            try:
                inputs = mi.module_inputs_func(mi, device="cpu", dtype=torch.float32, requires_grad=True,
                                               training=training)[:samples]
            except Exception as exc:  # noqa: BLE001
                print(json.dumps({"case": mi.name, "module": mi.name, "status": "skipped",
                                  "detail": f"module_inputs_func raises {type(exc).__name__}"}))
                continue
            for k, minput in enumerate(inputs):
                case = f"{mi.name}[{k}, {'train' if training else 'eval'}]"
                print(f"start {case}", flush=True)
                variants = [VARIANTS[i % len(VARIANTS)]] if fast else VARIANTS
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        res = check(mi, minput, training, variants)
                    except Exception as exc:  # noqa: BLE001 - the runner's own failure, per case
                        res = {"status": "differs", "detail": f"runner: {type(exc).__name__}: {exc}"[:300]}
                print(json.dumps({"case": case, "module": mi.name, "runs": len(variants), **res}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
