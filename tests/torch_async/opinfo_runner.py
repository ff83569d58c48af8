"""PyTorch's own OpInfo database as a peer test suite for ``asynchronous()``.

Run in a subprocess by ``test_opinfo.py`` (a crash then names its op)::

    python -m tests.torch_async.opinfo_runner START STOP [SAMPLES]

For each OpInfo ``op_db[START:STOP]`` that supports CPU float32, for its first ``SAMPLES`` samples
(made by the OpInfo itself, seeded): the op (forward), its in-place variant where it has one,
and the gradients of its outputs w.r.t. its inputs where it supports autograd -- eagerly, then
inside ``asynchronous()`` with 1 and 2 workers, with the inputs made outside the block (plain
tensors) and inside it (queued clones).  Every tensor is compared bitwise with eager's (dtype,
shape, bytes, NaNs equal; strides not compared: meta kernels may choose other strides for size-1
dimensions).  An op that eager torch rejects must be rejected too (same exception type).

Prints one line per op before it starts (``start NAME``) and one JSON line when it is done::

    {"op": "add", "status": "equal" | "differs" | "skipped", "detail": "...", "samples": 2}
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import torch

from d2l_async.torch_async import AsyncTensor, asynchronous

WAIT = 60.0


def _flat(x: Any) -> list:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for a in x for t in _flat(a)]
    if isinstance(x, dict):
        return [t for a in x.values() for t in _flat(a)]
    return [x]


def _plain(x: Any) -> Any:
    """What a value is, as plain comparable data (waits for an AsyncTensor's data)."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.is_sparse or t.layout is not torch.strided:
            t = t.to_dense()
        if t.is_conj():
            t = t.resolve_conj()
        if t.is_neg():
            t = t.resolve_neg()
        if type(t) is AsyncTensor:
            t = t._rt.value(t, "opinfo") if not t._rt.closed else t._real
            t = t.resolve_conj().resolve_neg() if t.is_conj() or t.is_neg() else t
        return ("tensor", str(x.dtype), tuple(x.shape), t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()
                if t.numel() and t.dtype is not torch.bool else t.tolist())
    if isinstance(x, (list, tuple)):
        return tuple(_plain(a) for a in x)
    if isinstance(x, float) and x != x:
        return "nan"
    return repr(x)


def _map(x: Any, fn) -> Any:
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_map(a, fn) for a in x)
    if isinstance(x, dict):
        return {k: _map(v, fn) for k, v in x.items()}
    return x


def _run(op, sample, inplace: bool, inside: bool) -> tuple:
    """One call: ``(forward, grads)`` as plain data, or ``("error", type name)``."""
    args = (sample.input, *sample.args)
    kwargs = dict(sample.kwargs)
    if inside:  # inputs made in the block: queued clones with the same requires_grad
        def clone(t: torch.Tensor) -> torch.Tensor:
            c = t.detach().clone()
            return c.requires_grad_() if t.requires_grad else c
        args, kwargs = _map(args, clone), _map(kwargs, clone)
    if inplace:  # the tensor written: a fresh copy that needs no grad (as OpInfo's own tests do)
        args = (_map(args[0], lambda t: t.detach().clone()), *args[1:])
    fn = op.inplace_variant if inplace else op.op
    torch.manual_seed(0)
    try:
        out = fn(*args, **kwargs)
        fwd = _plain(out)
    except Exception as exc:  # noqa: BLE001 - compared with the other run's
        return ("error", type(exc).__name__), None
    grads = None
    if not inplace and op.supports_autograd:
        outs = [o for o in _flat(out) if isinstance(o, torch.Tensor) and o.requires_grad]
        ins = [t for t in _flat(args) + _flat(kwargs) if isinstance(t, torch.Tensor) and t.requires_grad]
        if outs and ins:
            try:
                gs = torch.autograd.grad(outs, ins, [torch.ones_like(o) for o in outs], allow_unused=True)
                grads = _plain(list(gs))
            except Exception as exc:  # noqa: BLE001
                grads = ("error", type(exc).__name__)
    return fwd, grads


def _samples(op, n: int) -> list:
    torch.manual_seed(0)
    out = []
    for s in op.sample_inputs("cpu", torch.float32, requires_grad=op.supports_autograd):
        out.append(s)
        if len(out) >= n:
            break
    return out


def check_op(op, n: int) -> dict:
    if torch.float32 not in op.supported_dtypes("cpu"):
        return {"status": "skipped", "detail": "no CPU float32"}
    samples = _samples(op, n)
    variants = [False] + ([True] if op.inplace_variant is not None else [])
    for k, sample in enumerate(samples):
        for inplace in variants:
            # eager on the same inputs: the originals, or clones (a clone owns just its elements,
            # so e.g. as_strided over a larger storage reads other memory than on the original)
            eager = {inside: _run(op, sample, inplace, inside) for inside in (False, True)}
            for workers in (1, 2):
                for inside in (False, True):
                    expected = eager[inside]
                    where = f"sample {k}, {'in-place' if inplace else 'forward'}, {workers} worker(s), " \
                            f"inputs made {'inside' if inside else 'outside'}"
                    try:
                        with asynchronous(workers=workers, record=False) as rt:
                            got = _run(op, sample, inplace, inside)
                            rt.synchronize(timeout=WAIT)
                    except Exception as exc:  # noqa: BLE001 - an error eager did not raise
                        if expected[0] and expected[0][0] == "error":
                            continue  # eager raised too; deferred to the block's end like CUDA's
                        return {"status": "differs", "detail": f"{where}: raised {type(exc).__name__}: "
                                                                f"{str(exc).splitlines()[0][:200]}"}
                    if got[0] != expected[0]:
                        return {"status": "differs", "detail": f"{where}: forward differs "
                                                                f"({str(got[0])[:80]} vs {str(expected[0])[:80]})"}
                    if got[1] != expected[1]:
                        return {"status": "differs", "detail": f"{where}: gradients differ"}
    return {"status": "equal", "detail": "", "samples": len(samples)}


def main(argv: list[str]) -> None:
    from torch.testing._internal.common_methods_invocations import op_db
    start, stop = int(argv[0]), int(argv[1])
    n = int(argv[2]) if len(argv) > 2 else 2
    names = argv[3].split(",") if len(argv) > 3 and argv[3] else None
    warnings.simplefilter("ignore")
    for i, op in enumerate(op_db[start:stop], start):
        full = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if names is not None and full not in names:
            continue
        print(f"start {i} {full}", flush=True)
        try:
            res = check_op(op, n)
        except Exception as exc:  # noqa: BLE001 - the runner's own failure, reported per op
            res = {"status": "differs", "detail": f"runner: {type(exc).__name__}: {exc}"[:300]}
        print(json.dumps({"op": full, "index": i, **res}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
