"""The same lessons in JAX: a production framework whose CPU backend dispatches asynchronously.

PyTorch runs CPU ops on the calling thread, so the book's PyTorch tab stops where asynchrony starts,
and this package built its engine.  JAX does not: a ``jnp.dot`` returns once XLA's CPU client has
queued it, and the client's own threads run it.  Each function here runs one notebook's experiment
in JAX, records it with ``jax.profiler`` (:func:`d2l_async.capture.jax_capture`) and returns the
*same* frozen result the engine's run returns, with ``backend="jax"``, so the engine's lesson checks
decide it unchanged and the same figures draw its trace::

    notebook  function               result            decided by
    01        run_asynchrony_jax     AsynchronyResult  asynchrony.checks (naive vs synchronized timer)
    03        run_barriers_jax       BarrierResult     barriers.checks (one array's wait vs everything)
    04        run_blockers_jax       BlockersResult    blockers.checks, blockers.report_check
    05        run_sync_async_jax     SyncAsyncResult   SyncAsyncResult.lessons, .queue_lesson

What JAX calls each of the engine's words:

=====================  ===================================================================
engine                 JAX (CPU)
=====================  ===================================================================
push                   a dispatch: ``CommonPjRtLoadedExecutable::ExecuteHelper...``
virtual device         an XLA CPU device (``jax.devices("cpu")``): real runtime threads
``waitall()``          no such call: :func:`d2l_async.capture.jax_waitall` (in-order devices)
``z.wait_to_read()``   ``z.block_until_ready()``
``asnumpy()``          ``np.asarray(z)``
=====================  ===================================================================

Two facts of XLA's CPU client shape these runs, and are measured, not assumed: it runs a program of
under 1000 flops *inline*, on the calling thread, so ``y = x + 1`` on one element is synchronous in
fact (the 05 trace's ``meta["inline_executions"]`` counts them; the barriers' ``z`` is 64x64 so that it
is queued like the engine's); and it keeps at most some 32 executions in flight per device, after
which a dispatch waits (the queue's cap, like CUDA's ~1024 launches).

JAX is optional (``pip install "d2l-async[jax]"``): without it each function raises
:class:`~d2l_async.capture.JaxMissing`, which says how to install it.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import time
from typing import Any, Callable

from d2l_async import config

from .asynchrony import AsynchronyResult
from .barriers import BarrierResult
from .blockers import BlockEvent, BlockersResult, _measure_all
from .deadline import checkpoint
from .sync_async import CostModel, SyncAsyncResult, backend_pace
from ._common import Setup, make_measurement, positive_int, time_runs
from ._cpu import CpuClock, total

__all__ = ["DEMO_SIZE", "JAX_BLOCKERS", "JAX_BLOCKER_DEMO", "run_asynchrony_jax", "run_barriers_jax", "run_blockers_jax", "run_sync_async_jax"]

#: The blockers measured in JAX, in display order (the engine's names: ``asnumpy`` is ``np.asarray(b)``;
#: JAX arrays have no ``.numpy()``)
JAX_BLOCKERS = ("print", "item", "asnumpy", "float", "bool")
#: Side of the blocker demo's ``b``.  XLA adds 1 to a 1000x1000 array in about a millisecond on every core, and on
#: a busy 2-core machine the dispatching thread was often off the CPU for all of it: it reached 3-5 of the 5
#: blockers after the add had ended (8 runs at load 3.7); at 3000x3000 (36 MB, ~10 ms) it reached all 5 before, in
#: 8 runs of 8.  (The engine's demo adds to 1000x1000: its worker takes longer per op.)
DEMO_SIZE = 3000
#: The blocker demo's statements as its report shows them, by blocker
JAX_BLOCKER_DEMO = {"print": "print(b)", "item": "b.sum().item()", "asnumpy": "np.asarray(b)",
                    "float": "float(b.sum())", "bool": "if b.sum(): pass"}


def _jax(n_devices: int = 1) -> tuple[Any, Any, tuple[Any, ...], Setup]:
    """``(jax, jax.numpy, devices, setup)``; JaxMissing without JAX."""
    from d2l_async.capture import import_jax, jax_cpu_devices, jax_label

    jax = import_jax()
    import jax.numpy as jnp

    devices = jax_cpu_devices(n_devices)
    return jax, jnp, devices, Setup("jax", jax_label(len(devices)), False)


def _machine() -> Any:
    from d2l_async.devices import machine

    return machine(sample_s=0.05)


# ---------------------------------------------------------------------------------------------- 01
def run_asynchrony_jax(*, size: int | None = None, matmuls: int | None = None,
                       repeat: int | None = None) -> AsynchronyResult:
    """The book's ten products in JAX: NumPy, then ``jnp.dot`` timed naively and with ``block_until_ready``.

    Args:
        size: matrix side; default 1000 (quick mode 400), as :func:`~d2l_async.experiments.run_asynchrony`.
        matmuls: products per timed run; default 10 (quick mode 5).
        repeat: timed runs per variant (after one warm-up); default 5 (quick mode 2).

    Returns:
        The frozen :class:`~d2l_async.experiments.AsynchronyResult` with ``backend="jax"``: the NumPy, naive
        and synchronized :class:`Measurement`, the ``jax.profiler`` trace of one synchronized run, the sizes,
        where it ran and the :class:`~d2l_async.devices.Machine` read before it.  Decided by
        :func:`d2l_async.experiments.asynchrony.checks`.

    Raises:
        ValueError: a non-positive size or count.
        JaxMissing: JAX is not installed.
    """
    size = positive_int("size", size if size is not None else config.scale(1000, 400), maximum=8192)
    matmuls = positive_int("matmuls", matmuls if matmuls is not None else config.scale(10, 5), maximum=10_000)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(5, 2), maximum=1000)
    jax, jnp, (cpu,), setup = _jax()
    import numpy as np

    from d2l_async.capture import jax_capture

    here = _machine()
    host = np.random.default_rng(0).standard_normal((size, size), dtype=np.float32)

    def numpy_run() -> None:
        for _ in range(matmuls):
            host @ host
            checkpoint()

    numpy_m = make_measurement("numpy", time_runs(numpy_run, warmup=1, repeat=repeat), device="CPU (NumPy)")
    a = jax.device_put(host, cpu)
    jnp.dot(a, a).block_until_ready()  # compiled here, not in a timed run

    def queue_work() -> Any:  # dispatches only: the input exists before the timer starts
        for _ in range(matmuls):
            b = jnp.dot(a, a)
            checkpoint()
        return b

    last: list[Any] = []
    naive_raw = []
    for _ in range(repeat + 1):  # the first run is the warm-up; the queue drains outside the timer
        naive_raw.append(time_runs(lambda: last.append(queue_work()), warmup=0, repeat=1)[0])
        last.pop().block_until_ready()

    def synced() -> Any:
        b = queue_work()
        b.block_until_ready()  # one device runs its executions in order: the last one done, all done
        return b

    synced_raw = time_runs(synced, warmup=1, repeat=repeat)
    trace = jax_capture(synced).with_meta(device=setup.device, virtual=False, experiment="asynchrony")
    return AsynchronyResult(numpy_m, make_measurement("JAX, naive timer (no block_until_ready)", naive_raw[1:],
                                                      device=setup.device, synchronized=False),
                            make_measurement("JAX, block_until_ready", synced_raw, device=setup.device), trace,
                            size, matmuls, "jax", setup.device, False, here)


# ---------------------------------------------------------------------------------------------- 03
def _stable(size: int, seed: int) -> Any:
    """Rows of positive entries summing to 1 (as :func:`~d2l_async.experiments._common.stable_matrix`, in NumPy):
    long chains ``a = a @ m`` stay bounded and never reach slow denormal numbers."""
    import numpy as np

    m = np.random.default_rng(seed).random((size, size), dtype=np.float32) + 0.5
    return m / m.sum(axis=1, keepdims=True)


def run_barriers_jax(*, long_ops: int | None = None, size: int | None = None, follow_ops: int | None = None,
                     repeat: int | None = None) -> BarrierResult:
    """Long unrelated work on CPU device 1, a small ``z`` on device 0, then wait for everything or for ``z``.

    The engine's set-up (:func:`~d2l_async.experiments.run_barriers`) with JAX's two CPU devices
    (:func:`d2l_async.capture.jax_cpu_devices`): ``waitall()`` is ``jax.block_until_ready`` of every
    result, ``z.wait_to_read()`` is ``z.block_until_ready()``.  ``z`` is 64x64 (two ops of 4096 flops): a
    2x2 ``z`` is under XLA's 1000 flops, so it would run inline at its dispatch, before any wait.

    Args:
        long_ops: unrelated products chained on device 1; default 10 (quick mode 8).
        size: their matrix side; default 800 (quick mode 600).
        follow_ops: products issued after the wait on device 0, from ``z``'s value; default ``long_ops``.
        repeat: runs of each barrier, interleaved; default 3 (quick mode 2).

    Returns:
        The frozen :class:`~d2l_async.experiments.BarrierResult` with ``backend="jax"``, decided by
        :func:`d2l_async.experiments.barriers.checks`.

    Raises:
        ValueError: bad counts.
        JaxMissing: JAX is not installed.
        RuntimeError: JAX already started with one CPU device (restart, or set ``XLA_FLAGS``; the message says).
    """
    long_ops = positive_int("long_ops", long_ops if long_ops is not None else config.scale(10, 8), maximum=10_000)
    size = positive_int("size", size if size is not None else config.scale(800, 600), maximum=8192)
    follow_ops = positive_int("follow_ops", follow_ops if follow_ops is not None else long_ops, maximum=10_000)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(3, 2), maximum=1000)
    jax, jnp, (cpu0, cpu1), setup = _jax(2)
    from d2l_async.capture import jax_capture, jax_wait

    here = _machine()
    m1, m0 = jax.device_put(_stable(size, 0), cpu1), jax.device_put(_stable(size, 1), cpu0)
    a0 = jax.device_put(jnp.ones((size, size), dtype=jnp.float32), cpu1)
    x = jax.device_put(jnp.ones((64, 64), dtype=jnp.float32), cpu0)
    names = ("jax.block_until_ready(everything)", "z.block_until_ready()")

    def run(barrier: str) -> tuple[float, float, float, Any]:
        t_start = time.perf_counter()
        a = a0
        for _ in range(long_ops):  # unrelated work on the other device
            a = a @ m1
            checkpoint()
        z = x * 2 + 1
        t0 = time.perf_counter()
        if barrier == "waitall":
            with jax_wait("waitall", "jax.block_until_ready((a, z))"):
                jax.block_until_ready((a, z))
        else:
            with jax_wait("wait_to_read", "z.block_until_ready()"):
                z.block_until_ready()
        waited = time.perf_counter() - t0
        value = float(z.mean())
        useful = time.perf_counter() - t0  # z's value in hand: the next useful statement starts now
        c = jax.device_put(jnp.full((size, size), value, dtype=jnp.float32), cpu0)
        for _ in range(follow_ops):  # follow-up work that needed z's value
            c = c @ m0
            checkpoint()
        jax.block_until_ready((a, c))
        return waited, time.perf_counter() - t_start, useful, (a, c)

    run("waitall"), run("wait_to_read")  # warm-up: compiles every program
    runs: dict[str, list] = {"waitall": [], "wait_to_read": []}
    for _ in range(repeat):  # interleaved, so load on the machine hits both alike
        for barrier in runs:
            runs[barrier].append(run(barrier)[:3])
    traces = {b: jax_capture(lambda b=b: run(b)[3]) for b in runs}
    med = {b: [statistics.median(r[i] for r in runs[b]) for i in range(3)] for b in runs}
    meta = dict(device=setup.device, virtual=False, experiment="barriers")
    return BarrierResult(med["waitall"][0], med["wait_to_read"][0], med["waitall"][1], med["wait_to_read"][1],
                         traces["waitall"].with_meta(**meta, barrier=names[0]),
                         traces["wait_to_read"].with_meta(**meta, barrier=names[1]), long_ops, size, follow_ops,
                         "jax", setup.device, False, names, med["waitall"][2], med["wait_to_read"][2], here,
                         tuple(float(r[2]) for r in runs["waitall"]), tuple(float(r[2]) for r in runs["wait_to_read"]))


# ---------------------------------------------------------------------------------------------- 04
def _blocker_calls() -> dict[str, Callable[[Any], Any]]:
    import numpy as np

    sink = io.StringIO()

    def do_print(b: Any) -> None:
        with contextlib.redirect_stdout(sink):
            print(b)
        sink.seek(0)
        sink.truncate()

    def do_if(b: Any) -> None:
        if b.sum():  # an array in an ``if``: bool() needs the value
            pass

    return {"print": do_print, "item": lambda b: b.sum().item(), "asnumpy": lambda b: np.asarray(b),
            "float": lambda b: float(b.sum()), "bool": do_if}


def run_blockers_jax(*, steps: int | None = None, size: int | None = None,
                     repeat: int | None = None) -> BlockersResult:
    """What each blocker costs in JAX, converting every step vs once, and the blocker report of a demo.

    The engine's measurement (:func:`~d2l_async.experiments.run_blockers`, the same loops) with JAX arrays;
    ``waitall()`` is :func:`d2l_async.capture.jax_waitall`.  The report comes from the ``jax.profiler`` trace
    of one ``b = b + 1`` (:data:`DEMO_SIZE` squared) before each blocker, each blocker named with
    :func:`d2l_async.capture.jax_wait`; a blocker whose value was ready leaves no wait (as on the engine).

    Args:
        steps: steps of the per-call loops; default 1000 (quick mode 200).
        size: matrix side of the book-style run; default 1000 (quick mode 500).
        repeat: timed runs per measurement; default 5 (quick mode 2).

    Returns:
        The frozen :class:`~d2l_async.experiments.BlockersResult` with ``backend="jax"`` (blockers
        :data:`JAX_BLOCKERS`), decided by :func:`d2l_async.experiments.blockers.checks` and
        :func:`~d2l_async.experiments.blockers.report_check`.

    Raises:
        ValueError: bad counts.
        JaxMissing: JAX is not installed.
    """
    steps = positive_int("steps", steps if steps is not None else config.scale(1000, 200), maximum=1_000_000)
    size = positive_int("size", size if size is not None else config.scale(1000, 500), maximum=8192)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(5, 2), maximum=1000)
    jax, jnp, (cpu,), setup = _jax()
    import numpy as np

    from d2l_async.capture import jax_capture, jax_wait, jax_waitall

    here = _machine()
    rng = np.random.default_rng(0)

    def make(shape: tuple[int, int], fill: float | None) -> Any:
        host = (rng.random(shape, dtype=np.float32) / shape[0] if fill is None
                else np.full(shape, fill, dtype=np.float32))
        return jax.device_put(host, cpu)

    calls = _blocker_calls()
    per_call, baseline, book, every, once = _measure_all(make, lambda: jax_waitall(cpu), calls, steps, size, repeat,
                                                         setup)

    def demo() -> Any:
        b = make((DEMO_SIZE, DEMO_SIZE), 1.0)
        jax_waitall(cpu)
        for reason in JAX_BLOCKERS:
            b = b + 1  # each blocker needs this product: it waits unless it is done already
            with jax_wait(reason, JAX_BLOCKER_DEMO[reason]):
                calls[reason](b)
        return b

    demo()  # compiles the demo's programs outside the recording
    trace = jax_capture(demo).with_meta(device=setup.device, virtual=False, experiment="blockers")
    blocks = trace.where(kind="block")
    report = tuple(BlockEvent(str(r), str(s), float(e - b)) for r, s, b, e in
                   zip(blocks["reason"], blocks["source"], blocks["start"], blocks["end"]))
    return BlockersResult(per_call, baseline, book, every, once, report, trace, steps, size, "jax", setup.device,
                          False, here)


# ---------------------------------------------------------------------------------------------- 05
def run_sync_async_jax(*, ops: int | None = None, numel: int = 1, repeat: int | None = None,
                       trace_ops: int | None = None, jit: bool = False) -> SyncAsyncResult:
    """The book's ``n`` x ``y = x + 1`` in JAX: ``block_until_ready`` after every op, or once at the end.

    The engine's experiment (:func:`~d2l_async.experiments.run_sync_async`) and cost model, in JAX: ``t1`` from
    the issue loop, ``t2`` the backend's pace in the trace of the asynchronous loop (:func:`backend_pace`),
    ``t3`` the rest of the synchronous time; the CPU clock (:mod:`~d2l_async.experiments._cpu`) counts the
    dispatching thread as the frontend and every other thread, XLA's, as the backend.

    Args:
        ops: op count; default 10,000 like the book (quick mode 1,000).
        numel: elements of ``x``.  Under 1000 flops (``numel`` < 1000) XLA runs each op inline, on the
            calling thread: the "asynchronous" loop is then synchronous in fact (the trace says so in
            ``trace_async.meta["inline_executions"]``).
        repeat: timed runs of each loop (median reported); default 3 (quick mode 1).
        trace_ops: ops in the recorded traces; default ``min(ops, 2000)``.
        jit: ``y = f(x)`` with ``f = jax.jit(lambda x: x + 1)`` (one compiled call per op, dispatched from C++)
            instead of the array's ``x + 1`` (``jax.numpy``'s dispatch in Python first).

    Returns:
        The frozen :class:`~d2l_async.experiments.SyncAsyncResult` with ``backend="jax"`` (``eager`` None),
        decided by its ``lessons()`` and ``queue_lesson()``.

    Raises:
        ValueError: bad counts.
        TypeError: ``jit`` is not True or False.
        JaxMissing: JAX is not installed.
    """
    from d2l_async._args import flag

    ops = positive_int("ops", ops if ops is not None else config.scale(10_000, 1_000), maximum=1_000_000)
    numel = positive_int("numel", numel, maximum=1 << 28)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(3, 1), maximum=1000)
    trace_ops = positive_int("trace_ops", trace_ops if trace_ops is not None else min(ops, 2000), maximum=ops)
    jit = flag("jit", jit)
    jax, jnp, (cpu,), setup = _jax()
    from d2l_async.capture import jax_capture

    here = _machine()
    x = jax.device_put(jnp.ones(numel, dtype=jnp.float32), cpu)
    f = jax.jit(lambda v: v + 1) if jit else (lambda v: v + 1)

    def sync(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            y = f(x)
            y.block_until_ready()
        return time.perf_counter() - t0

    def asynchronous(n: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        for _ in range(n):
            y = f(x)
        issued = time.perf_counter() - t0
        y.block_until_ready()  # the device runs its executions in order: the last one done, all done
        return time.perf_counter() - t0, issued

    sync(min(ops, 100)), asynchronous(min(ops, 100))  # warm-up: compiles f
    sync_raw, async_raw, issue_raw, sync_cpu, async_cpu = [], [], [], [], []
    for _ in range(repeat):
        with CpuClock() as c:
            sync_raw.append(sync(ops))
        sync_cpu.append(c.times)
        with CpuClock() as c:
            seconds, issue = asynchronous(ops)
        async_cpu.append(c.times)
        async_raw.append(seconds)
        issue_raw.append(issue)
        checkpoint()
    trace_sync = jax_capture(sync, trace_ops)
    trace_async = jax_capture(asynchronous, trace_ops)
    t2, t2_source = backend_pace(trace_async)
    t1 = statistics.median(issue_raw) / ops
    t3 = max(0.0, statistics.median(sync_raw) / ops - t1 - t2)
    how = "jax.jit(lambda x: x + 1)" if jit else "x + 1"
    meta = dict(device=setup.device, virtual=False, experiment="sync_async", jit=jit)
    return SyncAsyncResult(
        make_measurement(f"synchronous ({how})", sync_raw, device=setup.device),
        make_measurement(f"asynchronous ({how})", async_raw, device=setup.device),
        CostModel(ops, t1, t2, t3, t2_source), trace_sync.with_meta(**meta, mode="sync"),
        trace_async.with_meta(**meta, mode="async"), ops, numel, "jax", setup.device, False, None,
        total(sync_cpu), total(async_cpu), here)
