"""Ready-made dashboards, one per experiment of the chapter; a notebook calls each in one line.

>>> from d2l_async.widgets import queue_dashboard
>>> queue_dashboard()          # doctest: +SKIP   (sliders, then the queue and the timeline)

Each function wires an experiment of :mod:`d2l_async.experiments` to the pure figures of
:mod:`d2l_async.viz` through a :class:`~d2l_async.widgets.Dashboard`.  The default workload of every
dashboard reruns and redraws in well under a second on a laptop CPU (``benchmarks/bench_dashboards.py``
measures it), so the first slider reacts on its own; larger values stay reachable and guards refuse
the ones that would not fit in memory.  Every status line says where the run happened (the CPU
engine's virtual devices are threads, never GPUs).

Keyword arguments of every function:
    mode: ``"auto"`` (default), ``"figurewidget"`` or ``"output"`` (Colab-style redraw).
    autorun: run once now with the defaults (default True).

=======================  ======================================  ===================================
dashboard                experiment                              figures
=======================  ======================================  ===================================
asynchrony_dashboard     run_asynchrony(size, matmuls)           timings, timeline
sync_async_dashboard     run_sync_async(ops, numel)              timings, async timeline
queue_dashboard          run_queue_memory(sync_every, ...)       queue + memory (live), timeline
dependency_dashboard     run_expression(expression, workers)     dependency graph, timeline
barrier_dashboard        run_barriers(long_ops, size)            wait per barrier, the two timelines
blocker_dashboard        run_blockers(steps, size)               cost of a blocker, blocked time
parallelism_dashboard    run_two_devices(ops, size)              time, concurrent vs barrier timeline
scheduling_dashboard     run_scheduling(workers, ops)            per-op cost against workers
trace_explorer(trace)    (none: a window over a trace)           timeline and queue of the window
=======================  ======================================  ===================================
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from d2l_async._args import sequence, span
from d2l_async._words import fmt_change, fmt_time

from ._controls import backend_dropdown, blocker_dropdown, dropdown, expression_dropdown, int_slider, log_slider
from ._dashboard import Dashboard
from ._guards import all_guards, check_bytes, matmul_seconds, ops_guard, time_guard, workload_bytes
from ._live import Live

__all__ = [
    "asynchrony_dashboard", "sync_async_dashboard", "queue_dashboard", "dependency_dashboard",
    "barrier_dashboard", "blocker_dashboard", "parallelism_dashboard", "scheduling_dashboard",
    "trace_explorer", "window_trace",
]


def _E() -> Any:
    # looked up at call time: tests may replace an experiment function to count its calls
    from d2l_async import experiments

    return experiments


def _viz() -> Any:
    from d2l_async import viz

    return viz


def _title(head: str, details: str = "") -> str:
    # a FigureWidget is ~650 px wide: a short first line, the run's details smaller below it
    return f"{head}<br><sup>{details}</sup>" if details else head


def _device(result: Any) -> str:
    return f"on {result.device}"


#: Rough engine cost of one tiny op, push to finish (seconds; pessimistic for a busy 2-core machine).
OP_SECONDS = 2e-4
#: Longest run a slider may start (seconds); larger predictions are refused with a message.
LIMIT_S = 30.0
#: Watch the engines a run creates: a progress bar appears if it takes more than ~2 s.
_PROGRESS = Live(figure=False)


def _products_guard(size: str, products: Any) -> Any:
    """Refuse runs whose ``products(values)`` matrix products of ``values[size]`` would take too long.

    The rate is the same kernel's at the requested size, measured now (:func:`matmul_seconds`); a
    ``backend="cuda"`` run is not judged by it.  The dashboard's deadline stops what slips through.
    """
    def seconds(v: Mapping[str, Any]) -> float:
        if v.get("backend") == "cuda":
            return 0.0
        return matmul_seconds(int(v[size]), max(int(products(v)), 1))

    return time_guard(seconds, limit_s=LIMIT_S)


def _matrices_guard(size: str, live: Any) -> Any:
    """Refuse ``live(values)`` float32 matrices of ``values[size]`` that do not fit in free memory."""

    def guard(values: Mapping[str, Any]) -> str | None:
        n, k = int(values[size]), int(live(values))
        return check_bytes(workload_bytes(n, k), what=f"{size}={n} ({k} live {n}x{n} float32 matrices)")

    return guard


# -- the chapter's experiments ---------------------------------------------------------------------
def asynchrony_dashboard(*, mode: str = "auto", autorun: bool = True) -> Dashboard:
    """NumPy vs the framework, timed naively and with a barrier: change the matrix size and count.

    Returns:
        A :class:`Dashboard` with the controls ``size`` (matrix side, powers of 2), ``matmuls`` and ``backend``, and
        the figures ``timings`` (NumPy, naive and synchronized runs) and ``timeline``; it has run once unless
        ``autorun=False``.
    """

    def experiment(*, size: int, matmuls: int, backend: str) -> Any:
        return _E().run_asynchrony(size=size, matmuls=matmuls, repeat=1, backend=backend)

    return Dashboard(
        experiment,
        {"size": log_slider("matrix size", 128, 32, 4096), "matmuls": int_slider("products", 5, 1, 50),
         "backend": backend_dropdown()},
        {"timings": lambda r: _viz().plot_measurements(r.measurements, title="Naive timer vs synchronized timer"),
         "timeline": lambda r: _viz().plot_timeline(r.trace)},
        # numpy, naive and synchronized runs with warm-ups, and the traced run: ~8 rounds of products
        guard=all_guards(_matrices_guard("size", lambda v: v["matmuls"] + 2),
                         _products_guard("size", lambda v: 8 * v["matmuls"])),
        live=_PROGRESS, title="Asynchrony: the frontend returns before the work is done", describe=_device, mode=mode,
        autorun=autorun,
    )


def sync_async_dashboard(*, mode: str = "auto", autorun: bool = True) -> Dashboard:
    """``n`` × ``y = x + 1``, synchronously and asynchronously: change ``n`` and the tensor size.

    Returns:
        A :class:`Dashboard` with the controls ``ops``, ``numel`` and ``backend``, and the figures ``timings``
        (synchronous vs asynchronous, the cost model in the title) and ``timeline`` (the asynchronous run); it has
        run once unless ``autorun=False``.
    """

    def experiment(*, ops: int, numel: int, backend: str) -> Any:
        return _E().run_sync_async(ops=ops, numel=numel, repeat=1, trace_ops=min(ops, 300), backend=backend)

    def timings(r: Any) -> Any:
        m = r.model
        title = _title(f"Synchronous {fmt_time(r.sync.median)} vs asynchronous {fmt_time(r.async_.median)} "
                       f"({r.ratio:.1f}x)",
                       f"{r.ops:,} ops; bottleneck: {m.bottleneck} (t1 {fmt_time(m.t1)}, "
                       f"t2 {fmt_time(m.t2)} per op, {m.t2_source})")
        return _viz().plot_measurements({"synchronous": r.sync, "asynchronous": r.async_}, title=title)

    def guard(values: Mapping[str, Any]) -> str | None:
        # the asynchronous run may hold every op's output at once
        need = int(values["ops"]) * int(values["numel"]) * 4
        return check_bytes(need, what=f"ops={values['ops']:,} x numel={values['numel']:,} float32 outputs")

    return Dashboard(
        experiment,
        {"ops": log_slider("ops (n)", 100, 10, 10_000, base=10),  # the book's 10,000 at most: fits Binder
         "numel": log_slider("elements of x", 1, 1, 1_000_000, base=10), "backend": backend_dropdown()},
        {"timings": timings, "timeline": lambda r: _viz().plot_timeline(r.trace_async)},
        guard=all_guards(ops_guard(n_ops="ops"), guard, time_guard(
            lambda v: 3 * v["ops"] * (OP_SECONDS + v["numel"] * 4 / 1e9), limit_s=LIMIT_S)),
        live=_PROGRESS, title="Synchronous vs asynchronous: n x (y = x + 1)", describe=_device, mode=mode, autorun=autorun,
    )


_NEVER = 0  # slider value meaning "never synchronize" / "no bound"


def queue_dashboard(*, mode: str = "auto", live: bool = True, autorun: bool = True) -> Dashboard:
    """Minibatches on the engine: synchronize every ``k`` steps (0: never) or bound the queue.

    Args:
        live: draw the engine's queue and pending memory while the loop runs (>= 5 Hz).

    Returns:
        A :class:`Dashboard` with the controls ``sync_every`` (0: never), ``max_pending`` (0: no bound) and
        ``batches``, and the figures ``queue`` (queue length and pending memory) and ``timeline``; with ``live``, a
        live view while it runs; it has run once unless ``autorun=False``.
    """
    batch_size, features = 64, 64

    def experiment(*, batches: int, sync_every: int, max_pending: int) -> Any:
        return _E().run_queue_memory(batches=batches, sync_every=sync_every or None,
                                     max_pending=max_pending or None, batch_size=batch_size, features=features)

    def guard(values: Mapping[str, Any]) -> str | None:
        # without a sync every batch copy and its product may be pending at once
        need = int(values["batches"]) * 2 * batch_size * features * 4
        return check_bytes(need, what=f"batches={values['batches']:,} pending minibatches")

    ops_per_batch = getattr(_E(), "OPS_PER_BATCH", 4)
    return Dashboard(
        experiment,
        {"sync_every": int_slider("sync every k", _NEVER, 0, 32),
         "max_pending": dropdown("max_pending", [("no bound", 0), ("4", 4), ("16", 16), ("64", 64), ("256", 256)]),
         "batches": int_slider("minibatches", 40, 10, 5000, step=10)},
        {"queue": lambda r: _viz().plot_queue_length(
            r.trace, memory=True,
            title=_title("Engine queue and pending memory",
                         f"max {r.max_queue} ops queued; peak pending memory {r.peak_pending_bytes / 2**20:.1f} MiB")),
         "timeline": lambda r: _viz().plot_timeline(r.trace)},
        live=Live(total=lambda v: int(v["batches"]) * ops_per_batch) if live else None,
        guard=guard, title="The queue grows unless the frontend waits (sync every k = 0: never)",
        describe=_device, mode=mode, autorun=autorun,
    )


def dependency_dashboard(*, mode: str = "auto", autorun: bool = True) -> Dashboard:
    """An expression's dependency graph as the engine scheduled it: pick the expression and workers.

    Returns:
        A :class:`Dashboard` with the controls ``expression``, ``workers`` and ``size``, and the figures ``graph``
        (the animated dependency graph) and ``timeline``; it has run once unless ``autorun=False``.
    """

    def experiment(*, expression: str, workers: int, size: int) -> Any:
        return _E().run_expression(expression=expression, size=size, workers=workers)

    return Dashboard(
        experiment,
        {"expression": expression_dropdown(), "workers": int_slider("workers", 2, 1, 8),
         "size": log_slider("array size", 2, 2, 1024)},
        {"graph": lambda r: _viz().plot_dependency_graph(r.trace, title=f"Dependency graph of {r.expression}"),
         "timeline": lambda r: _viz().plot_timeline(r.trace)},
        guard=all_guards(_matrices_guard("size", lambda v: 12), _products_guard("size", lambda v: 6)),
        title="Dependency graph: which ops may run at the same time", describe=_device, mode=mode, autorun=autorun,
    )


def barrier_dashboard(*, mode: str = "auto", autorun: bool = True) -> Dashboard:
    """``waitall()`` vs ``wait_to_read()`` with unrelated work queued: change how much work.

    Returns:
        A :class:`Dashboard` with the controls ``long_ops``, ``size`` and ``backend``, and the figures ``waits``
        (each barrier's wait) and the ``waitall`` and ``wait_to_read`` timelines; it has run once unless
        ``autorun=False``.
    """

    def experiment(*, long_ops: int, size: int, backend: str) -> Any:
        return _E().run_barriers(long_ops=long_ops, size=size, backend=backend)

    def waits(r: Any) -> Any:
        # what the narrow wait buys: the frontend's time from the barrier to its next useful statement
        a, b = r.barrier_names
        return _viz().plot_measurements(
            {a: [r.waitall_next], b: [r.wait_to_read_next]},
            title=_title("From the barrier to the frontend's next useful statement",
                         f"whole program: {fmt_time(r.waitall_total)} with {a}, "
                         f"{fmt_time(r.wait_to_read_total)} with {b}"))

    return Dashboard(
        experiment,
        {"long_ops": int_slider("unrelated products", 3, 1, 40), "size": log_slider("matrix size", 128, 32, 2048),
         "backend": backend_dropdown()},
        {"waits": waits,
         "waitall": lambda r: _viz().plot_timeline(r.trace_waitall, title=f"{r.barrier_names[0]}: waits for everything"),
         "wait_to_read": lambda r: _viz().plot_timeline(r.trace_wait_to_read,
                                                        title=f"{r.barrier_names[1]}: waits for z only")},
        guard=all_guards(_matrices_guard("size", lambda v: v["long_ops"] + 4),
                         _products_guard("size", lambda v: 2 * v["long_ops"] + 2)),
        live=_PROGRESS, title="Barriers: wait for everything, or only for what you read", describe=_device, mode=mode,
        autorun=autorun,
    )


def blocker_dashboard(*, mode: str = "auto", autorun: bool = True) -> Dashboard:
    """What an implicit blocker (print, item, asnumpy, ...) costs per step; pick the blocker shown.

    Returns:
        A :class:`Dashboard` with the controls ``steps``, ``size`` and ``backend``, the view control ``blocker``
        (redraws without rerunning), and the figures ``cost`` (the chosen blocker's cost per step) and ``blocked``
        (time blocked per cause); it has run once unless ``autorun=False``.
    """

    def experiment(*, steps: int, size: int, backend: str) -> Any:
        return _E().run_blockers(steps=steps, size=size, repeat=1, backend=backend)

    def cost(r: Any, *, blocker: str) -> Any:
        return _viz().plot_measurements(
            {"no blocker": r.baseline, blocker: r.per_call[blocker], "float() every step": r.every_step,
             "convert once at the end": r.once_at_end},
            title=_title(f"One step with {blocker}(b)", f"{fmt_change(r.cost(blocker))} against no blocker"))

    return Dashboard(
        experiment,
        {"steps": int_slider("steps", 50, 10, 2000, step=10), "size": log_slider("matrix size", 64, 16, 2048),
         "backend": backend_dropdown()},
        {"cost": cost, "blocked": lambda r, blocker: _viz().plot_blocked_time(r.trace)},
        view_controls={"blocker": blocker_dropdown()},
        guard=all_guards(_matrices_guard("size", lambda v: 4), _products_guard("size", lambda v: 8),
                         time_guard(lambda v: 10 * v["steps"] * OP_SECONDS, limit_s=LIMIT_S)),
        live=_PROGRESS, title="Blockers: every conversion to Python waits for the backend", describe=_device, mode=mode,
        autorun=autorun,
    )


def parallelism_dashboard(*, mode: str = "auto", autorun: bool = True) -> Dashboard:
    """Two devices working at once vs a barrier between them: change the work per device.

    The device kind starts where the lesson can show on this machine
    (:func:`d2l_async.experiments.parallel_lessons.plan_devices`): thread-devices where two cores are
    spare, else modelled-time devices (durations from a cost model, not measured); the other kinds
    stay in the dropdown, and the title says which ran.

    Returns:
        A :class:`Dashboard` with the controls ``ops``, ``size`` and ``backend`` (the device kind), and the figures
        ``times`` and the ``concurrent`` and ``serialized`` timelines; it has run once unless ``autorun=False``.
    """
    from d2l_async.engine import DeviceModel
    from d2l_async.experiments.parallel_lessons import plan_devices

    from ._controls import backends

    plan = plan_devices()
    speed = DeviceModel()

    def experiment(*, ops: int, size: int, backend: str) -> Any:
        return _E().run_two_devices(ops=ops, size=size, backend=backend, repeat=1)

    def times(r: Any) -> Any:
        kind = ("modelled devices: durations from a cost model, not measured" if r.backend == "modelled" else
                "virtual devices: threads on this CPU" if r.virtual else "GPUs")
        return _viz().plot_measurements(
            {"concurrent": [r.concurrent_seconds], "barrier between": [r.serialized_seconds]},
            title=_title(f"Two devices ({', '.join(r.devices)}): {r.speedup:.2f}× faster together", kind))

    def modelled_seconds(v: Mapping[str, Any]) -> float:  # the holds themselves: warm-up + two variants
        if v.get("backend") != "modelled":
            return 0.0
        return 4 * v["ops"] * speed.matmul_seconds(v["size"], v["size"], v["size"])

    kinds = [("modelled devices (cost model)", "modelled"), ("threads (virtual devices)", "engine")]
    if "cuda" in backends(min_gpus=2):
        kinds.append(("cuda (two GPUs)", "cuda"))
    return Dashboard(
        experiment,
        {"ops": int_slider("products per device", 4, 1, 40), "size": log_slider("matrix size", 256, 32, 2048),
         "backend": dropdown("devices", kinds, "engine" if plan.threads else "modelled")},
        {"times": times,
         "concurrent": lambda r: _viz().plot_timeline(r.trace_concurrent, title="Concurrent: both devices busy"),
         "serialized": lambda r: _viz().plot_timeline(r.trace_serialized, title="With a barrier between them")},
        guard=all_guards(_matrices_guard("size", lambda v: 2 * v["ops"] + 4),
                         _products_guard("size", lambda v: 4 * v["ops"] + 4),
                         time_guard(modelled_seconds, limit_s=LIMIT_S)),
        live=_PROGRESS, title="Parallelism across devices", describe=_device, mode=mode, autorun=autorun,
    )


def scheduling_dashboard(*, mode: str = "auto", autorun: bool = True) -> Dashboard:
    """The engine's per-op scheduling cost as worker threads grow (up to ``max workers``).

    Returns:
        A :class:`Dashboard` with the controls ``max_workers`` and ``ops``, and the figure ``overhead`` (per-op cost
        against the worker count); it has run once unless ``autorun=False``.
    """

    def experiment(*, max_workers: int, ops: int) -> Any:
        workers = tuple(2**i for i in range(int(np.log2(max_workers)) + 1))
        return _E().run_scheduling(workers=workers, ops=ops, repeats=3)

    def overhead(r: Any) -> Any:
        # every run drawn, the quartiles as error bars; wall and CPU time per op
        where = r.machine.describe() if getattr(r, "machine", None) is not None else f"{r.cpu_count} usable CPUs"
        return _viz().plot_scheduling_overhead(
            r.figure_rows(), title=_title(f"Per-op cost, 1 to {r.workers[-1]} worker threads", where))

    return Dashboard(
        experiment,
        {"max_workers": log_slider("max workers", 4, 1, 64), "ops": log_slider("ops", 256, 64, 65536)},
        {"overhead": overhead},
        # every worker count is measured with warm-up and repeats: ~4 rounds of ``ops`` each
        guard=all_guards(ops_guard(n_ops="ops"), time_guard(
            lambda v: 4 * v["ops"] * (int(np.log2(v["max_workers"])) + 1) * OP_SECONDS, limit_s=LIMIT_S)),
        live=_PROGRESS, title="Scheduling overhead: per-op cost as worker threads grow", describe=_device, mode=mode, autorun=autorun,
    )


# -- any trace ---------------------------------------------------------------------------------------
def window_trace(trace: Any, *, window: tuple[float, float], lanes: tuple[str, ...] | None = None) -> Any:
    """The events of ``trace`` on ``lanes`` that touch the time ``window`` (seconds), cut at its edges.

    An event is kept when ``[min(issue, start), end]`` overlaps the window, and its times are
    clipped to the window.  The queue length inside the window stays exact: an op issued before a
    time ``t`` of the window and not started by then is kept, and clipping does not move it across
    ``t``.  Bars that cross an edge are drawn cut (the meta records ``window`` and ``clipped``).

    Returns:
        A new :class:`~d2l_async.trace.Trace` of the kept events (every lane when ``lanes`` is ``None``), their
        times clipped to the window; its ``meta`` adds ``window`` (``(lo, hi)``) and ``clipped`` (how many events were
        cut).

    Raises:
        TypeError: ``trace`` is not a Trace.
        ValueError: an empty/inverted window, or a lane the trace does not have.
    """
    from d2l_async.trace import Trace

    if not isinstance(trace, Trace):
        raise TypeError(f"window_trace() expects a d2l_async.trace.Trace, got {type(trace).__name__}")
    lo, hi = span("window", window)
    names = [l.name for l in trace.lanes]
    lanes = tuple(names) if lanes is None else sequence("lanes", lanes, what="lane names (str)")
    unknown = [l for l in lanes if l not in names]
    if unknown:
        raise ValueError(f"lanes={lanes!r}: {unknown} are not in the trace; its lanes are {names}")
    first = np.fmin(trace["issue"], trace["start"])
    mask = (trace["end"] >= lo) & (first <= hi) & np.isin(trace["lane"], list(lanes))
    cols = {k: v[mask] for k, v in trace.columns.items()}
    clipped = int(np.sum((cols["start"] < lo) | (cols["end"] > hi)))
    for name in ("issue", "start", "end"):
        cols[name] = np.clip(cols[name], lo, hi)  # NaN (unknown issue) stays NaN
    keep = [l for l in trace.lanes if l.name in lanes]
    return Trace.from_columns(cols, keep, {**trace.meta, "window": (lo, hi), "clipped": clipped})


def trace_explorer(trace: Any = "v100_training_step", *, mode: str = "auto", autorun: bool = True) -> Dashboard:
    """Lanes and a time window over any trace (a :class:`~d2l_async.trace.Trace` or a sample name).

    Moving the window or choosing lanes crops the trace (:func:`window_trace`: every event that
    touches the window, cut at its edges, so the queue there is exact) and redraws it.

    Returns:
        A :class:`Dashboard` with the controls ``window`` (a time range) and ``lanes``, and the figure ``trace``
        (the cropped trace's timeline over its queue length); it has run once unless ``autorun=False``.
    """
    import ipywidgets as widgets

    if isinstance(trace, str):
        from d2l_async.data import load_sample

        trace = load_sample(trace)
    from d2l_async.trace import Trace

    if not isinstance(trace, Trace):
        raise TypeError(f"trace_explorer() expects a Trace or a sample name, got {type(trace).__name__}")
    names = [l.name for l in trace.lanes]
    finite = np.concatenate([trace["issue"], trace["start"], trace["end"]])
    finite = finite[np.isfinite(finite)]
    t0, t1 = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    if t1 <= t0:
        t1 = t0 + 1e-6
    step = (t1 - t0) / 200
    window = widgets.FloatRangeSlider(
        value=(t0, t0 + (t1 - t0) / 4), min=t0, max=t1, step=step, description="window (s)",
        continuous_update=False, readout_format=".4f", layout={"width": "620px"}, style={"description_width": "140px"},
    )
    lanes = widgets.SelectMultiple(options=names, value=tuple(names), description="lanes", rows=min(len(names), 6),
                                   layout={"width": "620px"}, style={"description_width": "140px"})

    def crop(*, lanes: tuple[str, ...], window: tuple[float, float]) -> Any:
        if not lanes:
            raise ValueError("select at least one lane")
        return window_trace(trace, window=window, lanes=lanes)

    def draw(part: Any) -> Any:
        lo, hi = part.meta["window"]
        cut = f"{part.meta['clipped']:,} events cut at the edges" if part.meta["clipped"] else ""
        return _viz().plot_trace(part, title=_title(f"{len(part):,} events between {lo:.4f} s and {hi:.4f} s", cut))

    return Dashboard(
        crop, {"window": window, "lanes": lanes}, {"trace": draw},
        title=f"Trace explorer: {trace.meta.get('device') or trace.meta.get('path') or 'trace'}",
        describe=lambda part: f"{len(part):,} of {len(trace):,} events", mode=mode, autorun=autorun,
    )
