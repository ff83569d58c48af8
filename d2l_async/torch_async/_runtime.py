"""The runtime: every torch op of the frontend becomes an engine op, run by a worker in order.

Inside ``with d2l_async.asynchronous():`` a ``TorchDispatchMode`` (:mod:`._context`) hands every
aten op -- ``torch.ones`` as much as ``x @ y`` or autograd's backward ops -- to
:meth:`AsyncRuntime.dispatch`, which does on the frontend only what it must::

    y = x + 1
      1. look the op up  (:mod:`._schema`: which args it writes, random?, blocking?)
      2. output metadata (:mod:`._meta`: cached meta kernels)  -> shape, dtype, view of x or new
      3. y = AsyncTensor(metadata)          no data yet: a wrapper without storage
      4. push an engine op:  reads = {x's storage var}, out = y's new storage var
         -> returns y at once;  a worker later runs aten.add(x._real, 1) and sets y._real

It is the engine's own scheduler (:class:`d2l_async.engine.core.Scheduler`, through its declared
subclass hooks ``submit`` and ``queue_ready``): the same inbox, workers, dependency rules, deferred
errors and observer protocol -- so a plain-torch run gives the same :class:`~d2l_async.trace.Trace`
(pushes, ops, blocks with the user's line) that every figure, blocker report and queue plot of
the package reads.

Dependencies (what lets N > 1 workers run plain torch correctly):

* one engine variable per *storage*; views share their base's.  An op reads the variables of its
  inputs and writes those of the arguments its schema marks ``(a!)`` (``add_``, ``copy_``,
  ``out=``, ``x[0] = 3``); the engine's rules then order every write after earlier reads and
  every read after earlier writes;
* one RNG variable, written by every ``nondeterministic_seeded`` op: random numbers are drawn in
  program order, so ``torch.manual_seed(0); torch.randn(3)`` gives eager torch's numbers;
* with one worker (the default) ops also *start* in program order (:mod:`._order`:
  holds a ready op until every earlier op has been handed out): exactly eager's order, like one
  CUDA stream, whatever the dependency analysis could have missed.

What runs synchronously (pushed like any op, then waited for -- a recorded *block* -- so it still
sees every earlier write and its error is eager torch's own, at the same line):

* ops whose result the frontend needs now: ``.item()``/``float()``/``bool()``/``if t:``
  (``_local_scalar_dense``), ``torch.equal``; ops with data-dependent shapes (``nonzero``, boolean
  masks, ``unique``);
* ops whose meta kernel fails: no meta kernel, or an error eager torch raises at the call
  (shape mismatch): the real op then raises it, at the call, as eager does;
* writes into a *plain* tensor (one made outside the block, e.g. a model's parameters before
  :func:`~d2l_async.torch_async.make_async`): other code may read its memory directly, so it is
  updated before the call returns;
* ops with an explicit ``generator=``: its state lives in Python and cannot be ordered;
* ``set_`` (``torch.load`` rebuilds tensors with it): the wrapper then takes its data's metadata
  and, for ``x.set_(y)``, y's variable; ops on nested or sparse tensors (no meta kernels; they
  stay plain); the few ops whose meta kernel promises other shapes than the CPU kernel makes
  (``._schema._META_DISAGREES``, found by the OpInfo suite).

What runs at once on the frontend, neither queued nor waited for: the profiler's
``record_function`` markers, in-place ops and ``.item()`` on idle *host scalars*
(``torch.tensor(number)``, see ``._sync.SyncPaths.try_here``), and the few ops a lazy layer's
uninitialized parameter allows (``.data``: it has no data yet).  Each op runs on the worker under
the frontend's state at push (:mod:`._state`).  A fresh output whose data has another shape than
the meta kernel promised fails its op (raised at the next blocking point), never silently.

Ops on CUDA tensors pass through unchanged: CUDA is asynchronous already.
"""

from __future__ import annotations

import itertools
import math
import threading
from typing import Any, Sequence

import torch
from torch.nn.parameter import UninitializedTensorMixin

from .._args import flag, workers as check_workers
from ..engine import live_engines
from ..engine.core import EngineError, EngineOp, EngineVar, Recorder, lower_priority, split_access
from ..trace import Trace
from ._meta import MetaCache, compute_specs, meta_of
from ._openmp import AUTO, others_runnable, should_free, usable_cpus
from ._openmp import free_frontend_team as _free_team
from ._order import OrderedReady
from ._schema import func_info
from ._state import capture, enter
from ._sync import RngVar, SyncPaths, TVar, answer_query, dispatch_any, escaped, run_eager
from ._tensor import AsyncTensor, set_dispatch, set_meta

__all__ = ["AsyncRuntime", "dispatch_any", "CACHE"]

aten = torch.ops.aten
_SCALARS = (int, float, bool, complex)
_ESCAPED = "memory shared with a numpy array (.numpy())"
#: One metadata cache for every runtime: output metadata does not depend on who asks.
CACHE = MetaCache()
_make = AsyncTensor.make
_LAZY = "an uninitialized (lazy) parameter"
#: How many steps of OS priority (``nice``) the workers give up to the frontend (Linux only; see
#: :func:`d2l_async.engine.core.lower_priority`).  On 2 cores the worker and its torch thread
#: otherwise take the frontend's CPU as often as not: the book's MLP loop returned after 49-52 %
#: of its finish time at 0, 28-31 % at 5 (medians of 7, alternating runs beside another process's
#: test run; benchmarks/bench_torch_async.py measures both).
WORKER_NICE = 5


def check_worker_nice(worker_nice: Any) -> int:
    """``worker_nice`` as :class:`AsyncRuntime` and ``asynchronous()`` take it, or a ValueError."""
    if isinstance(worker_nice, bool) or not isinstance(worker_nice, int) or not 0 <= worker_nice <= 19:
        raise ValueError(f"worker_nice={worker_nice!r}: pass an int from 0 (the frontend's priority) to 19")
    return worker_nice


def check_team(value: Any) -> bool | str:
    """``free_frontend_team`` as :class:`AsyncRuntime` and ``asynchronous()`` take it, or a TypeError."""
    if value is True or value is False or (isinstance(value, str) and value == AUTO):
        return value
    raise TypeError(f"free_frontend_team={value!r}: pass True, False or {AUTO!r} (the default: freed only when no "
                    "other process wants the CPUs, see d2l_async.torch_async._openmp)")


def check_flag(name: str, value: Any) -> bool:
    """A True/False argument of :class:`AsyncRuntime` or ``asynchronous()``, or a TypeError."""
    return flag(name, value)


def _real(a: Any) -> Any:
    return a._real if type(a) is AsyncTensor else a


def _run_op(op: EngineOp) -> None:
    """On a worker: the real op on the real tensors, under the frontend's state at push
    (:mod:`._state`); fill in the outputs' ``_real``."""
    args, kwargs, fill, state = op.arg
    with enter(state):
            res = op.fn(*[(a._real if type(a) is AsyncTensor else a) if type(a) not in (list, tuple) else
                      type(a)(map(_real, a)) for a in args],
                    **({k: (_real(v) if type(v) not in (list, tuple) else type(v)(map(_real, v)))
                        for k, v in kwargs.items()} if kwargs else {}))
    if fill:
        flat = res if type(res) in (tuple, list) else (res,)
        for i, w, shape in fill:
            r = w._real = flat[i]
            if shape is not None and r.shape != shape:  # fresh memory whose meta kernel erred: the
                # op fails (at the next blocking point) instead of a silent mismatch
                raise RuntimeError(
                    f"d2l_async: {op.name}'s meta kernel promised shape {tuple(shape)}, its CPU kernel "
                    f"made {tuple(r.shape)}; run this op outside the block (and please report it)")


class AsyncRuntime(SyncPaths, OrderedReady):
    """One ``asynchronous()`` block's backend: a virtual device ``cpu:0`` with ``workers`` threads.

    Args:
        workers: worker threads (1: program order, eager torch's semantics exactly).
        record: record a Trace (:meth:`trace`).
        torch_threads: torch intra-op threads per worker (default: the frontend's count, so
            reductions split the same way and results are bitwise eager's).
        worker_nice: OS priority steps the workers (and their torch threads) yield to the
            frontend, as a device never takes the frontend's CPU (0: none; Linux only).
        free_frontend_team: free the calling (frontend) thread's OpenMP threads, which idle
            while ops are queued and would make the workers' threads sleep between parallel
            kernels (:mod:`._openmp`; GNU libgomp only).  ``"auto"`` (default): only when no other
            process wants the CPUs as the block opens -- under load a freed team is the slow one.
            Done only when the workers use more than one torch thread.
    """

    engine_kind = "torch"

    def __init__(self, *, workers: int = 1, record: bool = True, torch_threads: int | None = None,
                 worker_nice: int = WORKER_NICE, free_frontend_team: bool | str = AUTO) -> None:
        # asked first in any case: torch sets a thread's count from a process-wide value on its first
        # parallel call, and the workers' set_num_threads(torch_threads) changes that value -- a
        # frontend that had not asked yet ran single-threaded after a torch_threads=1 block
        check_workers("workers", workers)  # before the OpenMP team and the priorities below are touched
        frontend = torch.get_num_threads()
        n = frontend if torch_threads is None else torch_threads
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"torch_threads={torch_threads!r}: pass a positive int, or None for the frontend's")
        check_worker_nice(worker_nice)
        check_team(free_frontend_team)
        self.torch_threads = n
        #: other processes' runnable tasks as the block opened (None: not asked, or unknown)
        self.others_runnable = others_runnable() if free_frontend_team == AUTO and n > 1 else None
        #: whether the frontend's OpenMP threads were freed for this block (see ._openmp)
        self.frontend_team_freed = should_free(free_frontend_team, n, usable_cpus(), self.others_runnable) and \
            _free_team()
        granted = self._nice_granted = [0]  # set by each worker as it starts

        def thread_init() -> None:  # refers to no runtime: a worker holds none while it lives
            granted[0] = lower_priority(worker_nice)
            torch.set_num_threads(n)
        self._fifo = workers == 1
        self._held: dict[int, EngineOp] = {}
        self._next = 0
        super().__init__(devices=("cpu:0",), workers=workers, thread_init=thread_init)
        self._dev = self.device_record(None)
        self._rng = RngVar("RNG")
        self._plain: dict[int, EngineVar] = {}
        self._labels = itertools.count()
        self._plain_lock = threading.Lock()
        self._recorder: Recorder | None = None
        if record:
            self._recorder = Recorder(self.devices, self.workers, self.engine_kind, self.t0, label_prefix="t")
            self.set_observers((self._recorder,))

    @property
    def worker_nice(self) -> int:
        """The OS priority steps the workers gave up to the frontend (what the OS granted)."""
        return self._nice_granted[0]

    # -- variables ---------------------------------------------------------------------------
    def _var_new(self) -> EngineVar:
        return TVar(next(self._labels))

    def _plain_var(self, t: torch.Tensor) -> EngineVar:
        """The variable of a plain tensor's storage (created on first use)."""
        try:
            key = t.untyped_storage().data_ptr()
        except Exception:  # noqa: BLE001 - no storage to order against: a fresh var
            return self._var_new()
        v = self._plain.get(key)
        if v is None:
            with self._plain_lock:
                v = self._plain.setdefault(key, TVar(f"plain{next(self._labels)}"))
        return v

    def _leaf_var(self, t: torch.Tensor) -> EngineVar:
        return t._var if type(t) is AsyncTensor else self._plain_var(t)

    def adopt(self, t: torch.Tensor) -> AsyncTensor:
        """Returns ``t`` as a finished AsyncTensor of this runtime (``t`` itself if it is one): a
        plain tensor whose data exists, wrapped with a fresh variable."""
        if type(t) is AsyncTensor:
            return t
        return _make(self, meta_of(t), self._var_new(), t, None)

    # -- the dispatch --------------------------------------------------------------------------
    def dispatch(self, func, args: tuple, kwargs: dict, depth: int = 3) -> Any:
        """Queue ``func(*args, **kwargs)`` and return its outputs at once (or wait, see module)."""
        try:
            info = func._d2l_async_info  # an attribute, not a dict: OpOverload hashes in Python
        except AttributeError:
            info = func._d2l_async_info = func_info(func)
        if info.query:
            return answer_query(func, args, kwargs)
        if info.here:
            return func(*args, **kwargs)
        if info.sync:
            return self.run_sync(func, args, kwargs, info.sync, depth + 1)
        if info.lift:  # torch.tensor(data): the data is there already
            t = self.adopt(args[0])
            if not t._m[0]:
                t._host = True  # a host scalar (see ._sync.SyncPaths.try_here)
            return t
        if self.closed:
            return run_eager(func, args, kwargs)
        leaves: list = []
        written: list = []
        key: list = [id(func)]  # ops are singletons; hashing an OpOverload runs Python
        wpos = info.write_pos
        slow = ""
        big = not (wpos or info.write_kw)  # only in-place ops on 0-dim tensors may run here (try_here)
        for i, a in enumerate(args):
            t = type(a)
            if t is AsyncTensor:
                if a._rt is not self:
                    slow = "a tensor of another asynchronous() block"
                if a._m[0]:
                    big = True
                if a._var.escaped is not None and escaped(a._var):
                    slow = slow or _ESCAPED
                key.append(a._m)
                leaves.append(a)
                written.append(i in wpos)
            elif t in _SCALARS:
                key.append((t, a))
            elif isinstance(a, torch.Tensor):
                slow = slow or self._check_plain(a, i in wpos)
                big = True
                key.append(None if slow else ("plain", meta_of(a)))
                leaves.append(a)
                written.append(i in wpos)
            elif t is list or t is tuple:
                sub = []
                for b in a:
                    if isinstance(b, torch.Tensor):
                        if type(b) is AsyncTensor:
                            if b._rt is not self:
                                slow = "a tensor of another asynchronous() block"
                            if b._m[0]:
                                big = True
                            if b._var.escaped is not None and escaped(b._var):
                                slow = slow or _ESCAPED
                            sub.append(b._m)
                        else:
                            slow = slow or self._check_plain(b, i in wpos)
                            big = True
                            sub.append(None if slow else ("plain", meta_of(b)))
                        leaves.append(b)
                        written.append(i in wpos)
                    else:
                        sub.append((type(b), b))
                key.append(tuple(sub))
            else:
                key.append(a)
        if kwargs:
            for name, a in kwargs.items():
                w = name in info.write_kw
                if isinstance(a, torch.Tensor):
                    big = True
                    if type(a) is AsyncTensor:
                        if a._rt is not self:
                            slow = "a tensor of another asynchronous() block"
                        if a._var.escaped is not None and escaped(a._var):
                            slow = slow or _ESCAPED
                        key.append((name, a._m))
                    else:
                        slow = slow or self._check_plain(a, w)
                        key.append(None if slow else (name, "plain", meta_of(a)))
                    leaves.append(a)
                    written.append(w)
                elif type(a) in (list, tuple):
                    if any(isinstance(b, torch.Tensor) for b in a):
                        slow = slow or "a list of tensors passed by keyword"
                    key.append((name, tuple(a)))
                elif name == "device" and a is not None and torch.device(a).type != "cpu":
                    slow = "cuda"
                elif name == "generator" and a is not None:
                    slow = slow or f"explicit generator: {info.name}"
                else:
                    key.append((name, type(a), a))
        if slow:
            if slow == "cuda":
                return self._passthrough(func, args, kwargs)
            if slow is _LAZY:
                return self.run_uninitialized(func, args, kwargs)
            if slow.startswith("a tensor of another"):
                args, kwargs = self._foreign(args, kwargs)
                return self.dispatch(func, args, kwargs, depth + 1)
            return self.run_sync(func, args, kwargs, slow, depth + 1)
        if not big and leaves and not info.seeded:
            done, res = self.try_here(func, info, args, kwargs, leaves, written)
            if done:
                return res
        entry = None
        if info.learn:
            key.append(_grad_enabled())  # the workspace exists only under grad mode
        if not info.meta_changing:
            try:
                entry = CACHE.entries.get(tuple(key))
            except TypeError:  # an unhashable argument: no caching for this call
                key = None
        if entry is None and info.learn:  # the meta kernel cannot say: one real run can (._schema)
            res = self.run_sync(func, args, kwargs, f"output sizes known only at run time: {info.name}", depth + 1)
            learned = _learned_specs(res, leaves)
            if learned is not None and key is not None:
                CACHE.put(tuple(key), learned)
            return res
        if entry is None:
            try:
                entry = compute_specs(func, args, kwargs, leaves, [t._m if type(t) is AsyncTensor else meta_of(t)
                                                                   for t in leaves], info.has_device)
            except Exception:  # noqa: BLE001 - data-dependent, no meta kernel, or an eager error
                return self.run_sync(func, args, kwargs, f"no output metadata: {info.name}", depth + 1)
            CACHE.misses += 1
            if info.meta_changing:  # t_(), resize_(), out=: the written inputs' metadata changed
                new = [meta_of(mt) if w and type(t) is AsyncTensor else None
                       for t, w, mt in zip(leaves, written, entry[2])]
                if info.write_kw and any(m is not None and m[0] != t._m[0] for t, m in zip(leaves, new)):
                    # an out= tensor of the wrong shape is resized: eager's kernel then picks the
                    # strides after its inputs' layout, the meta kernel row-major (a transposed
                    # input gave (2, 1) against eager's (1, 3)); eager's own kernel decides
                    return self.run_sync(func, args, kwargs, f"out= resizes its output: {info.name}", depth + 1)
                for t, m in zip(leaves, new):
                    if m is not None:
                        set_meta(t, m)
            elif key is not None:
                CACHE.put(tuple(key), entry)
        structure, specs = entry[0], entry[1]
        if not any(written) and structure == 0 and specs[0][0] == "view" and \
                type(leaves[specs[0][1]]) is not AsyncTensor:
            return func(*args, **kwargs)  # a view of a plain tensor reads no data: it stays plain
        reads, writes = [], []
        for t, w in zip(leaves, written):
            if type(t) is AsyncTensor:
                (writes if w else reads).append(t._var)
                if t._own is not None:  # a view: wait for the op that makes it, too
                    reads.append(t._own)
            else:
                (writes if w else reads).append(self._plain_var(t))
        if info.seeded:
            writes.append(self._rng)
        out_var = None
        outs = []
        fill = []
        nbytes = 0
        for i, spec in enumerate(specs):
            tag = spec[0]
            if tag == "new":
                v = self._var_new()
                if out_var is None:
                    out_var = v
                else:
                    writes.append(v)
                w = _make(self, spec[1], v)
                nbytes += spec[2]
                fill.append((i, w, spec[1][0]))  # the shape promised at push
            elif tag == "view":
                w = _make(self, spec[2], self._leaf_var(leaves[spec[1]]))
                # the view's storage var is its base's; its *own* var orders its readers after
                # the op that makes it (readers of one storage var would not wait for each other)
                v = w._own = TVar(next(self._labels))
                if out_var is None:
                    out_var = v
                else:
                    writes.append(v)
                fill.append((i, w, None))
            elif tag == "same":
                w = leaves[spec[1]]
            else:
                w = None
            outs.append(w)
        if writes:
            r, wr = split_access(reads, writes)
        else:  # most ops only read: dedupe (x + x), no write set to subtract
            r, wr = (tuple(reads) if len(reads) < 2 else tuple(dict.fromkeys(reads))), ()
        op = EngineOp(info.name, info.kind, _run_op, info.call, (args, kwargs, fill, capture()), r, wr, self._dev, nbytes, out_var)
        for _, w, _ in fill:
            w._op = op
        self.submit(op, depth)  # ._order.OrderedReady.submit: each var's last op, then the engine's push
        if structure == 0:
            return outs[0]
        if structure == 3:
            return None if not specs else ()
        return tuple(outs) if structure == 1 else outs

    def _check_plain(self, t: torch.Tensor, written: bool) -> str:
        """Why a plain tensor argument makes the op leave the fast path ("" if it does not)."""
        if t.device.type != "cpu":
            return "cuda"
        if t.is_nested or t.layout is not torch.strided:  # no meta kernels, no sizes to cache
            return f"a {'nested' if t.is_nested else str(t.layout).replace('torch.', '')} tensor"
        if isinstance(t, UninitializedTensorMixin):  # a lazy layer's, before its first forward: it
            # has no shape to ask (the book's LinearRegression writes `weight.data.normal_()`, §3.5)
            return _LAZY
        if written:
            return "write to a plain tensor"
        return ""

    # -- traces --------------------------------------------------------------------------------
    def trace(self) -> Trace:
        """Everything recorded so far: ops, their pushes, and the frontend's blocks.

        Returns:
            A :class:`~d2l_async.trace.Trace` (``meta["frontend"] == "plain PyTorch"``).

        Raises:
            EngineError: the block records nothing (``asynchronous(record=False)``).
        """
        if self._recorder is None:
            raise EngineError("recording is off; use asynchronous(record=True) to get a trace")
        return self._recorder.trace(pending=self.statistics().pending, frontend="plain PyTorch",
                                    torch_threads=self.torch_threads, worker_nice=self.worker_nice,
                                    frontend_team_freed=self.frontend_team_freed,
                                    others_runnable_at_open=self.others_runnable)

    def __repr__(self) -> str:
        s = self.statistics()
        state = "finished" if self.closed else f"{s.pending} pending, {s.done} done, {s.failed} failed"
        return f"<asynchronous torch on {self.workers} worker thread(s) of this CPU: {state}>"


_grad_enabled = torch.is_grad_enabled


def _learned_specs(res: Any, leaves: list) -> tuple | None:
    """A cache entry from the outputs of a real run: fresh tensors or None only (else None: an
    output that aliases an input is not learned, the op keeps running synchronously)."""
    flat = res if type(res) is tuple else None
    if flat is None:
        return None
    inputs = {id(t._var) for t in leaves if type(t) is AsyncTensor}
    specs = []
    for o in flat:
        if o is None:
            specs.append(("none",))
        elif type(o) is AsyncTensor and id(o._var) not in inputs and o._own is None:
            specs.append(("new", o._m, math.prod(o._m[0]) * o._m[3].itemsize))
        else:
            return None
    return 1, tuple(specs), None


set_dispatch(dispatch_any)


def live_runtimes() -> Sequence[AsyncRuntime]:
    """The runtimes of ``asynchronous()`` blocks that are not finished (``live_engines`` of this kind)."""
    return [e for e in live_engines() if isinstance(e, AsyncRuntime)]
