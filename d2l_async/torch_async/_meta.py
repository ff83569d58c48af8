"""Output metadata without running the op: meta tensors, and a cache in front of them.

To return ``y`` from ``y = x + 1`` at once, the frontend must know ``y``'s shape, strides, storage
offset and dtype, and whether ``y`` is new memory or a view of an input -- without the data.
torch's *meta* kernels compute exactly that on storage-less ``device="meta"`` tensors.  They cost
150--480 us per op in torch 2.13 (many are Python), three to ten times the op itself, so the answer
is cached per (op, argument structure, input metadata), as ``FakeTensor``'s dispatch cache does:
the second ``x + 1`` costs a dict lookup.

A tensor's metadata is the tuple ``M = (shape, stride, storage_offset, dtype)``.  An output is
described by a *spec*::

    ("same", i)        the op returned its input leaf i itself (in-place ops, out=)
    ("view", i, M)     a new tensor sharing input leaf i's storage (views: t(), x[0], reshape)
    ("new", M, nbytes) fresh memory
    ("none",)          no tensor in this position

Ops that change metadata in place (``t_``, ``resize_``, ``out=`` that resizes) are not cached: the
meta kernel runs every time and the new metadata of the written inputs is read back from it.
When a meta kernel fails -- a data-dependent shape, no meta kernel, or an op eager torch would
reject -- the op is run synchronously instead, so its error (if any) is eager torch's own.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

__all__ = ["meta_of", "meta_tensor", "set_bits", "warm", "compute_specs", "map_tensors", "MetaCache"]

_META = torch.device("meta")
M = tuple  # (shape, stride, storage_offset, dtype)


def meta_of(t: torch.Tensor) -> M:
    """The metadata tuple of a real or meta tensor; a complex view with the conjugate or negative
    bit set has a fifth element, the bits (1: conj, 2: neg), which a wrapper carries too."""
    m = (tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype)
    if t.dtype.is_complex:
        bits = (1 if t.is_conj() else 0) | (2 if t.is_neg() else 0)
        if bits:
            return (*m, bits)
    return m


def set_bits(t: torch.Tensor, bits: int) -> None:
    """Set the conjugate/negative bits of ``t`` (``bits`` as in :func:`meta_of`)."""
    if bits & 1:
        torch._C._set_conj(t, True)
    if bits & 2:
        torch._C._set_neg(t, True)


def meta_tensor(m: M) -> torch.Tensor:
    """A meta tensor with metadata ``m`` (on its own meta storage, large enough for its offset)."""
    shape, stride, offset, dtype = m[0], m[1], m[2], m[3]
    if offset == 0:
        t = torch.empty_strided(shape, stride, dtype=dtype, device=_META)
    else:
        extent = 1 + sum((s - 1) * abs(st) for s, st in zip(shape, stride)) if all(shape) else 0
        base = torch.empty((offset + extent,), dtype=dtype, device=_META)
        t = base.as_strided(shape, stride, offset)
    if len(m) > 4:
        set_bits(t, m[4])
    return t


def map_tensors(args: tuple, kwargs: dict, fn: Callable[[torch.Tensor], Any]) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with every tensor (top level, or inside a list/tuple) replaced by fn(t)."""
    def one(a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            return fn(a)
        if type(a) in (list, tuple) and any(isinstance(b, torch.Tensor) for b in a):
            return type(a)(fn(b) if isinstance(b, torch.Tensor) else b for b in a)
        return a
    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


#: Ops whose meta kernel disagrees with the CPU kernel on an output's shape, corrected here:
#: ``native_batch_norm(..., training=False)`` returns empty ``save_mean``/``save_invstd``.
_EMPTY_SAVED = (torch.ops.aten.native_batch_norm.default,)


def _nbytes(m: M) -> int:
    return math.prod(m[0]) * m[3].itemsize


def _writes_in_place_only(func) -> bool:
    """``func`` returns nothing and writes some of its arguments in place (``_foreach_add_``)."""
    schema = getattr(func, "_schema", None)
    return schema is not None and not schema.returns and \
        any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def compute_specs(func, args: tuple, kwargs: dict, leaves: list, leaf_meta: list[M],
                  has_device: bool) -> tuple[int, tuple, list]:
    """Run ``func``'s meta kernel; return ``(structure, specs, metas_of_leaves_after)``.

    ``structure``: 0 a single tensor, 1 a tuple, 2 a list, 3 nothing (None or ``()``).
    Raises whatever the meta kernel raises (the caller then runs the op synchronously).
    """
    metas = [meta_tensor(m) for m in leaf_meta]
    ids = {id(t): k for k, t in enumerate(leaves)}
    margs, mkwargs = map_tensors(args, kwargs, lambda t: metas[ids[id(t)]])
    if has_device:
        mkwargs["device"] = _META
    try:
        out = func(*margs, **mkwargs)
    except NotImplementedError:
        if not _writes_in_place_only(func):
            raise
        # no meta kernel, but nothing to compute: an op that returns nothing only writes its inputs in
        # place, shapes unchanged (torch 2.3 lacks _foreach_addcdiv_.ScalarList's, which AdamW(foreach=
        # True) calls each step; without this every step ran synchronously, in the version matrix)
        return 3, (), metas
    if out is None or (type(out) in (tuple, list) and not out):
        return 3, (), metas
    structure = 0 if isinstance(out, torch.Tensor) else (1 if type(out) is tuple else 2)
    flat = (out,) if structure == 0 else out
    storages = {}
    for k, mt in enumerate(metas):
        try:
            storages.setdefault(mt.untyped_storage()._cdata, k)
        except Exception:  # noqa: BLE001 - a meta tensor without storage: it cannot be aliased
            pass
    specs = []
    for o in flat:
        if not isinstance(o, torch.Tensor):
            if o is not None:
                raise TypeError(f"{func} returned a {type(o).__name__} among tensors")
            specs.append(("none",))
            continue
        if o.device.type != "meta":
            raise TypeError(f"{func}'s meta kernel returned a tensor on {o.device}")
        if o.layout is not torch.strided or o.is_nested:  # sparse/nested: no wrapper; run it synchronously
            raise TypeError(f"{func} returns a {o.layout} tensor")
        same = next((k for k, mt in enumerate(metas) if mt is o), None)
        if same is not None:
            specs.append(("same", same))
            continue
        m = meta_of(o)
        if len(specs) in (1, 2) and func in _EMPTY_SAVED and not args[5]:
            m = ((0,), (1,), 0, m[3])  # batch norm in eval: the CPU kernel saves nothing (meta: (C,))
        k = storages.get(o.untyped_storage()._cdata)
        specs.append(("view", k, m) if k is not None else ("new", m, _nbytes(m)))
    return structure, tuple(specs), metas


_WARM: list[float] = []


def warm() -> float:
    """Run a few common meta kernels once per process; returns the seconds it took (0 after).

    The first meta kernel that checks a shape imports torch's symbolic-shapes machinery (sympy,
    mpmath: about 480 modules, 0.4 s on the 2-core development machine, 1.7--2.5 s measured on a
    cold disk).  Paid inside a block, it made the first block's loop *return* late --
    no asynchrony to see in the README's first example.  Paid when the first block opens, the loop
    returns at once.
    """
    if _WARM:
        return 0.0
    import time
    t0 = time.perf_counter()
    a = torch.empty(2, 2, device=_META)
    v = torch.empty(2, device=_META)
    for f in (lambda: a @ a, lambda: a + a, lambda: a * 2, lambda: a.sum(), lambda: torch.relu(a),
              lambda: torch.addmm(v, a, a), lambda: a.t().reshape(4), lambda: torch.randn(2, 2, device=_META),
              lambda: torch.nn.functional.cross_entropy(a, torch.zeros(2, dtype=torch.long, device=_META))):
        try:
            f()
        except Exception:  # noqa: BLE001 - warming is a courtesy; the real op reports its own errors
            pass
    _WARM.append(time.perf_counter() - t0)
    return _WARM[0]


class MetaCache:
    """Output specs per (op, argument structure, input metadata); cleared when it grows too big
    (keys hold scalar values, so a loop over many different floats would otherwise grow it)."""

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self.entries: dict = {}
        self.hits = self.misses = 0
        self.default_dtype = torch.get_default_dtype()

    def check_default_dtype(self) -> None:
        """Drop every entry if the default dtype changed since they were made (factories and
        Python-scalar promotion read it; keys do not hold it, to keep the lookup short)."""
        d = torch.get_default_dtype()
        if d is not self.default_dtype:
            self.entries.clear()
            self.default_dtype = d

    def get(self, key: tuple) -> Any:
        return self.entries.get(key)

    def put(self, key: tuple, value: Any) -> None:
        if len(self.entries) >= self.limit:
            self.entries.clear()
        self.entries[key] = value
