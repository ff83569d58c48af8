"""What an operator's schema says about it: the facts dispatch needs, computed once per op.

Every aten op carries a schema (``add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1)
-> Tensor(a!)``) and tags.  From them, once per op, :func:`func_info` derives what decides how an
op is queued:

* ``writes``: which arguments it mutates (``(a!)``): their storages become *writes* of the op, so
  later readers wait for it and it waits for earlier readers (the engine's rules, ``engine.core``);
* ``seeded``: tag ``nondeterministic_seeded`` (``randn``, ``dropout``, ...): it draws from the
  global generator, so it also writes the one RNG variable -- random ops run in program order;
* ``sync`` and its reason: ops that cannot be queued because their *result* is needed now --
  a Python number (``_local_scalar_dense``: ``.item()``, ``bool(t)``, ``if t:``; ``equal``), or a
  shape that depends on the data (``nonzero``, boolean masks, ``unique``).  These are the blocking
  points: the op is queued like any other and the frontend waits for it;
* ``meta_changing``: it changes its argument's shape or strides in place (``t_``, ``resize_``,
  ``out=`` that resizes): its output metadata is recomputed every time instead of cached;
* ``here``: run on the frontend at once, neither queued nor waited for: the profiler's
  ``record_function`` markers around ``optimizer.step()``/``zero_grad()`` (they return a handle,
  not a tensor; waiting for them made every step a full barrier).  Like a
  CUDA program's markers, they stamp the time the frontend *queues* the work;
* ``query``: a metadata question (``sym_size``, ``dim``, ``is_contiguous``): answered from the
  wrapper's metadata without touching data;
* ``learn``: an output's size is known only to the CPU kernel (oneDNN's LSTM workspace): the
  first call per input metadata runs synchronously and teaches the cache its real output metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["FuncInfo", "func_info"]

aten = torch.ops.aten
_TENSOR_RETURNS = {"Tensor", "Tensor[]", "Tensor?", "Tensor?[]", "List[Tensor]", "Optional[Tensor]"}
_QUERY_WORDS = ("size", "stride", "numel", "dim", "storage_offset", "is_contiguous", "is_strides_like",
                "is_non_overlapping_and_dense", "is_same_size", "is_complex", "is_floating_point",
                "is_signed", "is_conj", "is_neg", "is_inference", "is_coalesced", "layout", "device")
_META_CHANGING = {"resize_", "resize_as_", "set_", "as_strided_", "squeeze_", "unsqueeze_", "t_",
                  "transpose_", "swapdims_", "swapaxes_", "detach_", "_resize_output_", "resize_as_sparse_"}


@dataclass(frozen=True)
class FuncInfo:
    """The facts of one op overload (see the module docstring)."""

    name: str
    write_pos: frozenset[int]
    write_kw: frozenset[str]
    seeded: bool
    sync: str          # "" or why the op must be waited for
    meta_changing: bool
    query: bool
    has_generator: bool
    has_device: bool
    kind: str          # "op" or "copy" (how traces draw it)
    lift: bool         # torch.tensor(data)'s lift_fresh: the data exists already
    here: bool = False  # run on the frontend at once: profiler markers (no data, no wait)
    learn: bool = False  # output metadata learned from a real run, once per input metadata
    host_outputs: frozenset = frozenset()  # positions of outputs left plain (C++ reads their memory)
    call: Any = None   # what a worker calls: the overload's C callable (``OpOverload._op``), one
    # Python frame (OpOverload.__call__, which only forwards to it) fewer per queued op


_CACHE: dict = {}
#: Ops that write arguments their schema does not mark ``(a!)``: ``native_batch_norm`` updates
#: ``running_mean``/``running_var`` (positions 3, 4) in training mode.
_EXTRA_WRITES = {"native_batch_norm": {3, 4}}


#: Ops whose meta kernel promises other output shapes than their CPU kernel makes (found by the
#: OpInfo suite, tests/torch_async/test_opinfo.py): run synchronously, the outputs wrapped from the
#: real results.  (``native_batch_norm`` in eval is corrected in ._meta instead: it is common.)
_META_DISAGREES = {"_native_batch_norm_legit", "_embedding_bag", "_embedding_bag_forward_only"}
#: Ops with an output whose size only the CPU kernel knows, a function of the input metadata and grad
#: mode: ``mkldnn_rnn_layer``'s workspace (every ``nn.LSTM`` forward on a CPU) is what oneDNN asks for
#: at run time (28,672 bytes for 5 x 3 x 4 -> 8, 18 MB for 35 x 32 x 4 -> 256; its meta kernel
#: promises 0) and undefined without grad mode.  The first call for each metadata runs synchronously
#: and its outputs' metadata is cached; later calls are queued with the right promise (._runtime).
_LEARN_SHAPES = {"mkldnn_rnn_layer"}
#: Ops with outputs that C++ kernels read from memory before any op is dispatched -- host tensors,
#: as a CUDA program keeps them on the CPU: ``_pack_padded_sequence``'s ``batch_sizes``, which
#: ``nn.LSTM``/``nn.GRU`` on a ``PackedSequence`` and ``pad_packed_sequence`` read (a storage-less
#: wrapper failed them with "data is not allocated yet").  They run synchronously and those outputs
#: stay plain tensors.
_HOST_OUTPUTS = {"_pack_padded_sequence": frozenset({1})}


def func_info(func) -> FuncInfo:
    """The :class:`FuncInfo` of ``func`` (an ``OpOverload``), cached."""
    info = _CACHE.get(func)
    if info is None:
        info = _CACHE[func] = _compute(func)
    return info


def _compute(func) -> FuncInfo:
    schema = func._schema
    name = func.overloadpacket.__name__
    tags = set(getattr(func, "tags", ()))
    write_pos, write_kw = set(), set()
    pos = 0
    has_generator = has_device = False
    for arg in schema.arguments:
        t = str(arg.type)
        if "Generator" in t:
            has_generator = True
        if arg.name == "device":
            has_device = True
        written = arg.alias_info is not None and arg.alias_info.is_write
        if arg.kwarg_only:
            if written:
                write_kw.add(arg.name)
        else:
            if written:
                write_pos.add(pos)
            pos += 1
    write_pos |= _EXTRA_WRITES.get(name, set())
    returns = [str(r.type) for r in schema.returns]
    non_tensor = any(r not in _TENSOR_RETURNS for r in returns)
    query = non_tensor and any(w in name for w in _QUERY_WORDS) and not write_pos and not write_kw
    sync = ""
    if not query:
        if name in _META_DISAGREES:
            sync = f"meta kernel disagrees: {name}"
        elif name in _HOST_OUTPUTS:
            sync = f"an output C++ reads from memory: {name}"
        elif name == "set_":  # shares another storage (torch.load's rebuild): vars follow, see _sync
            sync = "set_"
        elif non_tensor:
            sync = "item" if name == "_local_scalar_dense" else name
        elif torch.Tag.dynamic_output_shape in tags:
            sync = f"data-dependent shape: {name}"
        elif torch.Tag.data_dependent_output in tags:
            sync = f"data-dependent output: {name}"
    out_overload = bool(write_kw) or "out" in schema.overload_name
    meta_changing = (torch.Tag.inplace_view in tags or name in _META_CHANGING or out_overload)
    kind = "copy" if name in ("copy_", "_to_copy", "clone", "_copy_from", "lift_fresh_copy") else "op"
    return FuncInfo(name=name, write_pos=frozenset(write_pos), write_kw=frozenset(write_kw),
                    seeded=torch.Tag.nondeterministic_seeded in tags, sync=sync,
                    meta_changing=meta_changing, query=query, has_generator=has_generator,
                    has_device=has_device, kind=kind, lift=name in ("lift_fresh", "lift"),
                    here=func.namespace == "profiler", call=getattr(func, "_op", func),
                    learn=name in _LEARN_SHAPES, host_outputs=_HOST_OUTPUTS.get(name, frozenset()))
