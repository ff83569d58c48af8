"""Random torch programs, and a runner that records everything a program lets one observe.

A program is a list of steps over a pool of tensors (indices wrap around the pool).  The runner
executes it with plain torch calls, so the very same code runs eagerly and inside
``d2l_async.asynchronous()``; what it records (every value read in the middle, every error's
type, and at the end every tensor's dtype, shape and bytes) must be identical.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

SHAPES = [(3,), (2, 3), (), (1, 3), (2, 1), (3, 3)]
DTYPES = [torch.float32, torch.float64, torch.int64]
NEW = ["ones", "zeros", "arange", "randn", "tensor", "full", "rand", "empty_fill"]
BINARY = ["add", "sub", "mul", "div", "matmul", "maximum", "pow", "eq_where", "cat", "stack"]
UNARY = ["neg", "exp", "relu", "sum", "mean", "sum0", "cumsum", "abs", "sqrt", "clone", "float",
         "long", "softmax", "max_dim", "sort"]
VIEWS = ["t", "flatten", "index0", "slice", "unsqueeze", "transpose", "diagonal", "unbind0", "detach"]
INPLACE = ["add_", "mul_", "sub_", "copy_", "zero_", "fill_", "clamp_", "setitem", "index_add_",
           "t_", "out", "div_scalar_", "unsqueeze_"]
RANDOM = ["normal_", "uniform_", "randn_like", "bernoulli", "dropout", "randint"]
BLOCK = ["item", "tolist", "numpy", "nonzero", "masked", "bool", "repr", "equal"]

_idx = st.integers(0, 99)
SCALARS = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0, 0.0]))

step = st.one_of(
    st.tuples(st.just("new"), st.sampled_from(NEW), st.sampled_from(range(len(SHAPES))),
              st.sampled_from(range(len(DTYPES)))),
    st.tuples(st.just("bin"), st.sampled_from(BINARY), _idx, _idx),
    st.tuples(st.just("scalar"), st.sampled_from(["add", "mul", "sub", "div", "rsub"]), _idx, SCALARS),
    st.tuples(st.just("unary"), st.sampled_from(UNARY), _idx),
    st.tuples(st.just("view"), st.sampled_from(VIEWS), _idx),
    st.tuples(st.just("inplace"), st.sampled_from(INPLACE), _idx, _idx, SCALARS),
    st.tuples(st.just("random"), st.sampled_from(RANDOM), _idx),
    st.tuples(st.just("block"), st.sampled_from(BLOCK), _idx),
)
programs = st.tuples(st.lists(st.tuples(st.sampled_from(range(len(SHAPES))), st.sampled_from(range(len(DTYPES)))),
                              min_size=1, max_size=3),
                     st.lists(step, min_size=1, max_size=25),
                     st.integers(0, 2**16))


def initial(spec: list) -> list[torch.Tensor]:
    """The pool's first tensors: plain tensors made *before* the block (the hard case)."""
    g = torch.Generator().manual_seed(1234)
    out = []
    for k, (s, d) in enumerate(spec):
        t = torch.randn(SHAPES[s], generator=g) * 3
        out.append(t.to(DTYPES[d]) if DTYPES[d] is not torch.float32 else t)
    return out


def _new(kind: str, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    if kind == "ones":
        return torch.ones(shape, dtype=dtype)
    if kind == "zeros":
        return torch.zeros(shape, dtype=dtype)
    if kind == "arange":
        n = int(np.prod(shape))
        return torch.arange(n, dtype=dtype).reshape(shape) - 2
    if kind == "randn":
        return torch.randn(shape, dtype=dtype if dtype.is_floating_point else torch.float32)
    if kind == "rand":
        return torch.rand(shape, dtype=torch.float64)
    if kind == "tensor":
        return torch.tensor(np.arange(int(np.prod(shape))).reshape(shape).tolist(), dtype=dtype)
    if kind == "full":
        return torch.full(shape, 2.5 if dtype.is_floating_point else 2, dtype=dtype)
    t = torch.empty(shape, dtype=dtype)
    return t.fill_(1)


def _bin(op: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / b
    if op == "matmul":
        return a @ b
    if op == "maximum":
        return torch.maximum(a, b)
    if op == "pow":
        return a.abs() ** b
    if op == "eq_where":
        return torch.where(a > b, a, b)
    if op == "cat":
        return torch.cat([a.reshape(-1), b.reshape(-1)])
    return torch.stack([a, b])


def _unary(op: str, a: torch.Tensor):
    fns = {"neg": lambda: -a, "exp": lambda: a.exp(), "relu": lambda: a.relu(), "sum": lambda: a.sum(),
           "mean": lambda: a.float().mean(), "sum0": lambda: a.sum(0), "cumsum": lambda: a.cumsum(0),
           "abs": lambda: a.abs(), "sqrt": lambda: a.sqrt(), "clone": lambda: a.clone(),
           "float": lambda: a.float(), "long": lambda: a.long(), "softmax": lambda: F.softmax(a.double(), 0),
           "max_dim": lambda: a.max(0)[1], "sort": lambda: a.sort(descending=True)[0]}
    return fns[op]()


def _view(op: str, a: torch.Tensor):
    fns = {"t": lambda: a.t(), "flatten": lambda: a.reshape(-1), "index0": lambda: a[0],
           "slice": lambda: a[..., :1], "unsqueeze": lambda: a.unsqueeze(0), "transpose": lambda: a.transpose(0, -1),
           "diagonal": lambda: a.diagonal(), "unbind0": lambda: a.unbind(0)[-1], "detach": lambda: a.detach()}
    return fns[op]()


def _inplace(op: str, a: torch.Tensor, b: torch.Tensor, s) -> torch.Tensor:
    if op == "add_":
        return a.add_(b)
    if op == "mul_":
        return a.mul_(s)
    if op == "sub_":
        return a.sub_(b, alpha=2)
    if op == "copy_":
        return a.copy_(b)
    if op == "zero_":
        return a.zero_()
    if op == "fill_":
        return a.fill_(s)
    if op == "clamp_":
        return a.clamp_(-1, 1)
    if op == "setitem":
        a[0] = 3
        return a
    if op == "index_add_":
        return a.index_add_(0, torch.tensor([0]), b[:1] if b.dim() else b.reshape(1))
    if op == "t_":
        return a.t_()
    if op == "out":
        torch.add(a, 1, out=b)
        return b
    if op == "unsqueeze_":
        return a.unsqueeze_(0)
    return a.div_(2)


def _random(op: str, a: torch.Tensor) -> torch.Tensor:
    if not a.dtype.is_floating_point:
        a = a.double()
    if op == "normal_":
        return a.normal_()
    if op == "uniform_":
        return a.uniform_(-1, 1)
    if op == "randn_like":
        return torch.randn_like(a)
    if op == "bernoulli":
        return torch.bernoulli(torch.full_like(a, 0.5))
    if op == "dropout":
        return F.dropout(a, 0.5, training=True)
    return torch.randint(0, 10, (3,))


def _block(op: str, a: torch.Tensor):
    if op == "item":
        return a.sum().item()
    if op == "tolist":
        return a.tolist()
    if op == "numpy":
        return a.numpy().tobytes()
    if op == "nonzero":
        return a.nonzero()
    if op == "masked":
        return a[a > 0]
    if op == "bool":
        return bool(a.sum() > 0)
    if op == "repr":
        return repr(a)
    return torch.equal(a, a.clone())


def observe(t) -> tuple:
    """What a value shows: for a tensor its dtype, shape and exact bytes (NaNs included)."""
    if isinstance(t, torch.Tensor):
        arr = t.detach().numpy()
        return ("tensor", str(t.dtype), tuple(t.shape), np.ascontiguousarray(arr).tobytes())
    if isinstance(t, (float, list)):
        return ("value", repr(t))  # repr: nan == nan, and -0.0 != 0.0
    return ("value", t)


def run(program: tuple, start: list[torch.Tensor], barrier=lambda: None) -> tuple[list, tuple | None]:
    """Run ``program`` with plain torch calls until its first error.

    Returns ``(seen, error)``: everything observed, in order, and ``(step, type name)`` of the
    first error (``step == len(steps)`` for one raised by ``barrier()`` or the final reads).
    """
    _, steps, seed = program
    torch.manual_seed(seed)
    pool = list(start)
    seen: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, s in enumerate(steps):
            kind = s[0]
            pick = lambda j: pool[j % len(pool)]  # noqa: E731
            try:
                if kind == "new":
                    out = _new(s[1], SHAPES[s[2]], DTYPES[s[3]])
                elif kind == "bin":
                    out = _bin(s[1], pick(s[2]), pick(s[3]))
                elif kind == "scalar":
                    a, c = pick(s[2]), s[3]
                    out = {"add": lambda: a + c, "mul": lambda: a * c, "sub": lambda: a - c,
                           "div": lambda: a / c, "rsub": lambda: c - a}[s[1]]()
                elif kind == "unary":
                    out = _unary(s[1], pick(s[2]))
                elif kind == "view":
                    out = _view(s[1], pick(s[2]))
                elif kind == "inplace":
                    out = _inplace(s[1], pick(s[2]), pick(s[3]), s[4])
                elif kind == "random":
                    out = _random(s[1], pick(s[2]))
                else:
                    seen.append(("block", observe(_block(s[1], pick(s[2])))))
                    continue
            except Exception as exc:  # noqa: BLE001 - compared with the other run's
                return seen, (k, type(exc).__name__)
            pool.append(out)
        try:
            barrier()
            seen.extend(("end", observe(t)) for t in pool)
        except Exception as exc:  # noqa: BLE001
            return seen, (len(steps), type(exc).__name__)
    return seen, None


def same_behaviour(eager: tuple, queued: tuple, later: str | None = None) -> bool:
    """Eager torch and the queued run agree: the same observations and no error, or the same
    observations up to eager's error and then its error type -- at the same step, or deferred to
    a later blocking point as CUDA defers a kernel's error (then an independent op may fail
    first, and eager's error must surface by the final barrier: ``later``)."""
    (seen_e, err_e), (seen_q, err_q) = eager, queued
    if err_e is None:
        return err_q is None and seen_q == seen_e
    if err_q is None or err_q[0] < err_e[0]:
        return False
    if err_q[0] == err_e[0] and err_q[1] != err_e[1]:
        return False
    if err_q[1] != err_e[1] and later != err_e[1]:
        return False
    return seen_q[:len(seen_e)] == seen_e
