"""The report's steps: run one experiment, turn its result into table rows, figures and numbers.

Each step is a function ``(Backends) -> StepOutput``.  The experiments do the measuring
(:mod:`d2l_async.experiments`), the figures come from :mod:`d2l_async.viz`; this module only chooses
what to show and writes the numbers as text.  Numbers are always the ones just measured; the book's
come from :data:`d2l_async.experiments.BOOK` and are labelled as the book's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from d2l_async._words import fmt_time

from ._table import Row

__all__ = ["Backends", "StepOutput", "Step", "STEPS", "fmt_seconds", "useful_sources", "failed_output"]


@dataclass(frozen=True)
class Backends:
    """Which backend each kind of experiment uses for the report's ``--device``.

    Attributes:
        one: for experiments on one device (``"engine"``, ``"cuda"`` or ``"auto"``).
        two: for experiments that need two devices (CUDA only with two GPUs).
        profile: for the torch.profiler step (``"cpu"``, ``"cuda"`` or ``"auto"``).
        gpu_sized: the one-device experiments run on a GPU, at the sizes measured for it
            (:mod:`d2l_async.experiments.sizing`, as the notebooks' CUDA runs get them).
    """

    one: str
    two: str
    profile: str
    gpu_sized: bool = False

    @classmethod
    def for_device(cls, device: str) -> "Backends":
        """``"auto"``, ``"cpu"`` or ``"cuda"`` (checked by the caller) -> backends."""
        if device == "cpu":
            return cls("engine", "engine", "cpu")
        import torch

        if device == "cuda":
            two = "cuda" if torch.cuda.device_count() >= 2 else "engine"  # labelled virtual in the table
            return cls("cuda", two, "cuda", gpu_sized=True)
        return cls("auto", "auto", "auto", gpu_sized=torch.cuda.is_available())

    def sizes(self, key: str) -> dict[str, Any]:
        """The keyword arguments that size experiment ``key`` for this backend: this GPU's
        (:func:`d2l_async.experiments.workload`) on a GPU, none (the engine's defaults) on the CPU."""
        from d2l_async.experiments import sizing

        if key not in sizing.WORKLOADS:
            raise ValueError(f"no workload sizes for {key!r}; known: {sorted(sizing.WORKLOADS)}")
        return sizing.workload(key, backend="cuda") if self.gpu_sized else {}

    def sizing(self) -> dict[str, Any] | None:
        """What the GPU's sizes were picked from (:meth:`DeviceSizes.to_dict
        <d2l_async.experiments.sizing.DeviceSizes.to_dict>`), or its error; None on the CPU."""
        if not self.gpu_sized:
            return None
        from d2l_async.experiments import device_sizes

        try:
            return device_sizes().to_dict()
        except Exception as exc:  # noqa: BLE001 - the steps that need it report their own failure
            return {"error": f"{type(exc).__name__}: {exc}"}


@dataclass(frozen=True)
class StepOutput:
    """What one step contributes to the report.

    Attributes:
        rows: lines of the results table.
        figures: ``(caption, plotly figure)`` pairs.
        numbers: plain numbers for the JSON file (seconds unless the key says otherwise).
        notes: sentences printed under the step's figures.
        checks: the step's lesson checks (:class:`d2l_async.lesson.Check`): each claim with the
            numbers of this run, ✔ or ✘ with its reason; printed after the table and in the HTML.
        error: the traceback of a step that raised (:func:`failed_output`); empty when it ran.
    """

    rows: tuple[Row, ...]
    figures: tuple[tuple[str, Any], ...]
    numbers: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    checks: tuple[Any, ...] = ()
    error: str = ""


def failed_output(key: str, exc: BaseException) -> StepOutput:
    """What a step that raised contributes: one table row naming the error, and its traceback (``error``,
    rendered in the HTML and written to the JSON), so the other steps' results are kept."""
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    first = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    return StepOutput((Row(f"{key}: FAILED", "—", first, "—"),), (), {"error": first, "traceback": text},
                      error=text)


@dataclass(frozen=True)
class Step:
    """A named step of the report: ``key`` (JSON key), ``title`` (section heading), ``run``."""

    key: str
    title: str
    run: Callable[[Backends], StepOutput]


def fmt_seconds(s: float) -> str:
    """Seconds with a readable unit: ``3.16 s``, ``34 ms``, ``4.56 µs`` (:func:`d2l_async._words.fmt_time`)."""
    return fmt_time(s)


def useful_sources(trace: Any) -> Any:
    """``trace`` with source lines kept only where they point into the experiment's own code.

    The engine attributes a block to the first frame outside ``d2l_async``; when the report runs
    the experiments, that frame is the command line's entry point, which says nothing.  Lines of
    the blocker demo (``<blocker demo>:4``) and of the experiment modules are kept.
    """
    import numpy as np

    src = trace["source"]
    if not len(src):
        return trace
    files = _experiment_files()
    keep = np.array([s.startswith("<") or s.split(":", 1)[0] in files for s in src], dtype=bool)
    if keep.all():
        return trace
    from d2l_async.trace import Trace

    cols = dict(trace.columns)
    cols["source"] = np.where(keep, src, "").astype(object)
    return Trace.from_columns(cols, trace.lanes, trace.meta)


def _experiment_files() -> set[str]:
    from pathlib import Path

    import d2l_async.experiments as ex

    return {p.name for p in Path(ex.__file__).parent.glob("*.py")}


def _book(key: str) -> str:
    from d2l_async.experiments import BOOK

    n = BOOK[key]
    return f"{n.value:g} {n.unit}" if n.unit != "×" else f"{n.value:g}×"


# -- the steps ------------------------------------------------------------------------------
def asynchrony(b: Backends) -> StepOutput:
    from d2l_async import viz
    from d2l_async.experiments import run_asynchrony

    r = run_asynchrony(backend=b.one, **b.sizes("asynchrony"))
    what = f"{r.matmuls} × {r.size}² matmul"
    rows = (
        Row(f"asynchrony: {what}, NumPy", "—", fmt_seconds(r.numpy.median), "CPU (NumPy, synchronous)"),
        Row(f"asynchrony: {what}, framework naive vs synchronized timer", "—",
            f"{fmt_seconds(r.naive.median)} vs {fmt_seconds(r.synced.median)} "
            f"({100 * r.hidden_fraction:.0f}% hidden from the naive timer)", r.device),
    )
    figs = (("Timings: NumPy, the framework timed naively, and synchronized", viz.plot_measurements(r.measurements)),
            ("Timeline of one synchronized run", viz.plot_timeline(useful_sources(r.trace))))
    nums = {"numpy": r.numpy.median, "naive": r.naive.median, "synchronized": r.synced.median,
            "size": r.size, "matmuls": r.matmuls, "device": r.device, "virtual": r.virtual}
    from d2l_async.experiments.asynchrony import checks

    return StepOutput(rows, figs, nums, checks=tuple(checks(r)))


def dependency(b: Backends) -> StepOutput:
    from d2l_async import viz
    from d2l_async.experiments import run_expression, run_independent_vs_dependent

    e = run_expression("x * y + 2")
    ind = run_independent_vs_dependent(workers=(1, 2))
    rows = [Row("dependency: z = x * y + 2 on the engine equals eager torch", "—", "yes" if e.matches else "NO",
                e.device)]
    for r in ind:
        rows.append(Row(f"dependency: {r.chains} independent chains vs 1 dependent chain, {r.workers} worker(s)",
                        "—", f"{fmt_seconds(r.independent_seconds)} vs {fmt_seconds(r.dependent_seconds)} "
                        f"(speed-up {r.speedup:.2f}×)", r.device))
    two = ind[-1]
    figs = (("The dependency graph of z = x * y + 2 (press play)",
             viz.plot_dependency_graph(useful_sources(e.trace))),
            (f"Independent chains on {two.workers} workers",
             viz.plot_timeline(useful_sources(two.trace_independent))),
            (f"One dependent chain on {two.workers} workers",
             viz.plot_timeline(useful_sources(two.trace_dependent))))
    nums = {"expression_matches": e.matches,
            "chains": [{"workers": r.workers, "independent": r.independent_seconds,
                        "dependent": r.dependent_seconds, "speedup": r.speedup} for r in ind]}
    from d2l_async.experiments.parallel_lessons import independence_checks

    return StepOutput(tuple(rows), figs, nums, checks=tuple(independence_checks(ind)))


def barriers(b: Backends) -> StepOutput:
    from d2l_async import viz
    from d2l_async.experiments import run_barriers

    r = run_barriers(backend=b.one, **b.sizes("barriers"))
    a, o = r.barrier_names
    rows = (Row(f"barriers: frontend wait in {a} vs {o} (unrelated work queued)", "—",
                f"{fmt_seconds(r.waitall_wait)} vs {fmt_seconds(r.wait_to_read_wait)}", r.device),
            Row(f"barriers: whole program, then {r.follow_ops} follow-up products that need z", "—",
                f"{fmt_seconds(r.waitall_total)} vs {fmt_seconds(r.wait_to_read_total)}", r.device))
    figs = ((f"{a}: the frontend waits for everything, then issues the follow-up",
             viz.plot_timeline(useful_sources(r.trace_waitall))),
            (f"{o}: the frontend waits for z only; the follow-up overlaps the long work",
             viz.plot_timeline(useful_sources(r.trace_wait_to_read))))
    nums = {"waitall_wait": r.waitall_wait, "wait_to_read_wait": r.wait_to_read_wait,
            "waitall_total": r.waitall_total, "wait_to_read_total": r.wait_to_read_total, "device": r.device}
    from d2l_async.experiments.barriers import checks

    return StepOutput(rows, figs, nums, checks=tuple(checks(r)))


def blockers(b: Backends) -> StepOutput:
    from d2l_async import viz
    from d2l_async.experiments import run_blockers

    r = run_blockers(backend=b.one, **b.sizes("blockers"))
    rows = [Row(f"blockers: b = a @ a ({r.size}²) then {name}", _book(f"blockers.{name}"),
                fmt_seconds(r.book_style[name].median), r.device) for name in ("asnumpy", "item")]
    rows.append(Row("blockers: time per step b = b + 1; blocker(b), 1×2 array", "—",
                    f"no blocker {fmt_seconds(r.baseline.median)}; "
                    + ", ".join(f"{k} {fmt_seconds(m.median)}" for k, m in r.per_call.items()), r.device))
    rows.append(Row("blockers: loss to float every step vs once at the end", "—",
                    f"{fmt_seconds(r.every_step.median)} vs {fmt_seconds(r.once_at_end.median)}", r.device))
    figs = (("Time per loop step with each blocker (and none)", viz.plot_measurements(
        {"no blocker": r.baseline, **r.per_call})),
        ("The blocker report: where the frontend waited", viz.plot_blocked_time(r.trace, by="source")))
    nums = {"book_style": {k: m.median for k, m in r.book_style.items()},
            "per_call": {k: r.cost(k) for k in r.per_call}, "baseline_step": r.baseline.median,
            "per_step": {k: m.median for k, m in r.per_call.items()},
            "every_step": r.every_step.median, "once_at_end": r.once_at_end.median,
            "report": [{"reason": e.reason, "source": e.source, "seconds": e.seconds} for e in r.report]}
    notes = tuple(f"{e.reason}: {e.source} ({fmt_seconds(e.seconds)})" for e in r.report)
    from d2l_async.experiments.blockers import checks

    return StepOutput(tuple(rows), figs, nums, notes, tuple(checks(r)))


def sync_async(b: Backends) -> StepOutput:
    from d2l_async import viz
    from d2l_async.experiments import run_sync_async, sweep_sync_async

    r = run_sync_async(backend=b.one)
    m = r.model
    sw = sweep_sync_async(backend=b.one, **b.sizes("sync_async_sweep"))
    biggest = max(p.numel for p in sw.points)
    rows = (Row(f"sync vs async: {r.ops:,} × y = x + 1", f"{_book('sync_async.sync')} vs {_book('sync_async.async')} "
                f"({_book('sync_async.ratio')}, 10,000 ops)",
                f"{fmt_seconds(r.sync.median)} vs {fmt_seconds(r.async_.median)} ({r.ratio:.2f}×)", r.device),
            *((Row("sync vs async: the same loop in eager PyTorch (CPU ops are synchronous, no engine)", "—",
                   f"{fmt_seconds(r.eager.median)} ({fmt_seconds(r.eager.median / r.ops)} per op)",
                   r.eager.device),) if r.eager is not None else ()),
            Row("sync vs async: cost model per op", "—",
                f"t1 {fmt_seconds(m.t1)}, t2 {fmt_seconds(m.t2)}, t3 {fmt_seconds(m.t3)}; {m.bottleneck}-bound",
                r.device),
            Row("sync vs async: ratio at the largest tensor swept", "—",
                ", ".join(f"{p.ops} ops: {p.ratio:.2f}×" for p in sw.points if p.numel == biggest)
                + f" ({biggest:,} elements)", sw.device))
    figs = (("Synchronous vs asynchronous", viz.plot_measurements({"synchronous": r.sync, "asynchronous": r.async_})),
            ("The asynchronous run: the queue the frontend builds up", viz.plot_trace(useful_sources(r.trace_async))),
            ("Where the advantage disappears: sync/async ratio by op count and tensor size", viz.plot_sweep(sw)))
    nums = {"ops": r.ops, "sync": r.sync.median, "async": r.async_.median, "ratio": r.ratio,
            "eager": r.eager.median if r.eager is not None else None,
            "t1": m.t1, "t2": m.t2, "t3": m.t3, "model_sync": m.sync, "model_async_book": m.async_book,
            "model_async_pipeline": m.async_pipeline, "model_gap": r.model_gap,
            "sweep": [{"ops": p.ops, "numel": p.numel, "sync": p.sync_seconds, "async": p.async_seconds,
                       "ratio": p.ratio} for p in sw.points]}
    cpu = r.cpu_async.divided(len(r.async_.raw)) if r.cpu_async is not None else None
    if cpu is not None:
        nums["cpu_async"] = {"wall": cpu.wall, "frontend": cpu.frontend, "workers": cpu.backend,
                             "concurrency": cpu.concurrency}
    nums["model_async_serial"] = m.async_serial
    notes = (f"How t1, t2, t3 were estimated: {m.method}",
             f"Book's async model t1 + n·t2 + t3 = {fmt_seconds(m.async_book)}; pipeline model "
             f"n·max(t1, t2) + min(t1, t2) + t3 = {fmt_seconds(m.async_pipeline)}; taking turns "
             f"n·(t1 + t2) + t3 = {fmt_seconds(m.async_serial)}; measured {fmt_seconds(r.async_.median)}.")
    return StepOutput(rows, figs, nums, notes, (*r.lessons(), r.queue_lesson(), *sw.lessons()))


def queue_memory(b: Backends) -> StepOutput:
    from d2l_async import viz
    from d2l_async.experiments import compare_sync_every, run_queue_memory, sample_queue_summary
    from d2l_async.experiments.queue_memory import backpressure_check, launch_cap_check, queue_checks

    run_queue_memory(batches=2)  # warm-up: the engine's first ops pay a one-time start-up cost
    runs = compare_sync_every(ks=(None, 1, 4))
    bp = run_queue_memory(max_pending=8)
    s = sample_queue_summary("v100_training_step")
    rows = [Row(f"queue: {r.batches} minibatches, " + ("never synced" if r.sync_every is None else
                                                         f"sync every {r.sync_every}"), "—",
                f"max queue {r.max_queue} ops, peak pending {r.peak_pending_bytes / 2**20:.2f} MiB, "
                f"total {fmt_seconds(r.seconds)} (backend busy {fmt_seconds(r.backend_busy_seconds)})", r.device)
            for r in runs]
    rows.append(Row(f"queue: max_pending={bp.max_pending} back-pressure", "—",
                    f"max queue {bp.max_queue}, frontend blocked {fmt_seconds(bp.blocked_seconds)}", bp.device))
    rows.append(Row("queue: real V100 training step (recorded trace)", "—",
                    f"launch queue max {s.max_queue} ({100 * s.fraction_at_max:.0f}% of the time at max); "
                    f"{fmt_seconds(s.launch_seconds_at_cap)} of {fmt_seconds(s.launch_seconds)} in launches made "
                    f"at the cap", f"{s.gpu} (shipped trace, not this machine)"))
    never, k4 = runs[0], runs[-1]
    figs = (("Never synchronized: the queue and the memory it holds grow",
             viz.plot_queue_length(never.trace, memory=True)),
            (f"Synchronized every {k4.sync_every} minibatches: both stay bounded",
             viz.plot_queue_length(k4.trace, memory=True)),
            ("The V100 trace: the launch queue sits at the CUDA cap", viz.plot_queue_length(s.trace)))
    nums = {"runs": [{"sync_every": r.sync_every, "max_queue": r.max_queue, "bound": r.queue_bound,
                      "peak_pending_bytes": r.peak_pending_bytes, "seconds": r.seconds,
                      "backend_busy": r.backend_busy_seconds, "blocked": r.blocked_seconds} for r in runs],
            "max_pending": {"bound": bp.max_pending, "max_queue": bp.max_queue, "blocked": bp.blocked_seconds},
            "v100": {"max_queue": s.max_queue, "fraction_at_max": s.fraction_at_max,
                     "launch_seconds": s.launch_seconds, "launch_seconds_at_cap": s.launch_seconds_at_cap}}
    checks = (*queue_checks(runs), backpressure_check(bp), launch_cap_check(s))
    return StepOutput(tuple(rows), figs, nums, checks=checks)


def parallelism(b: Backends) -> StepOutput:
    from d2l_async import viz
    from d2l_async.experiments import run_mlp_parallel, run_two_devices

    r = run_two_devices(backend=b.two)
    mlp = run_mlp_parallel(backend=b.two)
    ov = mlp.overlap
    rows = (Row("parallelism: two devices concurrent vs a barrier between them", "—",
                f"{fmt_seconds(r.concurrent_seconds)} vs {fmt_seconds(r.serialized_seconds)} "
                f"(speed-up {r.speedup:.2f}×)", r.device),
            Row(f"parallelism: data-parallel MLP, {mlp.batches} minibatches", "—",
                f"{fmt_seconds(mlp.seconds)}; compute and copies overlapped {fmt_seconds(ov.both)} "
                f"({100 * ov.fraction_of_b:.0f}% of copy time); loss {mlp.losses[0]:.3g} → {mlp.losses[-1]:.3g}",
                mlp.device))
    figs = (("Two devices, issued together", viz.plot_timeline(useful_sources(r.trace_concurrent))),
            ("Two devices with a barrier between them", viz.plot_timeline(useful_sources(r.trace_serialized))),
            ("Data-parallel MLP: forward, backward, gradient copies and updates",
             viz.plot_timeline(useful_sources(mlp.trace))))
    nums = {"concurrent": r.concurrent_seconds, "serialized": r.serialized_seconds, "speedup": r.speedup,
            "mlp_seconds": mlp.seconds, "overlap_both": ov.both, "compute_busy": ov.busy_a, "copy_busy": ov.busy_b,
            "losses": list(mlp.losses), "roles": dict(mlp.roles)}
    from d2l_async.experiments.parallel_lessons import mlp_checks, two_device_checks

    return StepOutput(rows, figs, nums, checks=(*two_device_checks(r), *mlp_checks(mlp)))


def scheduling(b: Backends) -> StepOutput:
    from d2l_async import viz
    from d2l_async.experiments import run_scheduling

    run_scheduling(workers=(1,), ops=100, repeats=1)  # warm-up: the engine's one-time start-up cost
    r = run_scheduling()
    cpu = dict(zip(r.workers, r.cpu_per_op_seconds))
    rows = (Row("scheduling: per-op cost of a tiny op, 1 → 16 worker threads (wall; CPU)",
                "laptops: 4+ threads; servers: over 256 (text, no timing)",
                ", ".join(f"{w}: {fmt_seconds(s)}" + (f"; {fmt_seconds(cpu[w])}" if w in cpu else "")
                          for w, s in r.rows()), f"{r.device}; {r.cpu_count} usable CPUs"),)
    figs = (("Scheduling overhead as worker threads grow (error bars: quartiles of the runs)",
             viz.plot_scheduling_overhead(r.figure_rows())),)
    nums = {"per_op": {str(w): s for w, s in r.rows()}, "cpu_per_op": {str(w): s for w, s in cpu.items()},
            "eager_per_op": r.eager_per_op_seconds, "cpu_count": r.cpu_count,
            "runs_us": {str(o.workers): list(o.runs) for o in r.raw},
            "cpu_runs_us": {str(o.workers): list(o.cpu_runs) for o in r.raw}}
    return StepOutput(rows, figs, nums, checks=tuple(r.lessons()))


def profiling(b: Backends) -> StepOutput:
    from d2l_async import viz
    from d2l_async.experiments import run_profiling, sample_summaries

    r = run_profiling(backend=b.profile)
    rows = [Row(f"profiling: torch.profiler on {r.model}, {r.steps} steps", "—",
                f"{r.events} events, {r.backend_events} on backend lanes, max queue {r.max_queue}", r.device)]
    samples = sample_summaries()
    for s in samples:
        rows.append(Row(f"profiling: shipped trace {s.name}", "—",
                        f"max launch queue {s.max_queue}, time-weighted mean {s.time_weighted_mean:.0f}",
                        f"{s.gpu} (shipped trace, not this machine)"))
    figs = (("Your own code under torch.profiler", viz.plot_timeline(useful_sources(r.trace))),
            (f"The {samples[-1].name} trace (real GPU)", viz.plot_queue_length(samples[-1].trace)))
    nums = {"events": r.events, "backend_events": r.backend_events, "max_queue": r.max_queue,
            "samples": {s.name: {"max_queue": s.max_queue, "time_weighted_mean": s.time_weighted_mean}
                        for s in samples}}
    return StepOutput(tuple(rows), figs, nums)


#: The report, in the order of the notebooks.
STEPS: tuple[Step, ...] = (
    Step("asynchrony", "1. Asynchrony: the frontend returns at once", asynchrony),
    Step("dependency", "2. The dependency graph", dependency),
    Step("barriers", "3. Barriers: waitall vs wait_to_read", barriers),
    Step("blockers", "4. Implicit blockers", blockers),
    Step("sync_async", "5. Synchronous vs asynchronous issue", sync_async),
    Step("queue_memory", "6. Queue memory and minibatch synchronization", queue_memory),
    Step("parallelism", "7. Automatic parallelism", parallelism),
    Step("scheduling", "8. Scheduling overhead", scheduling),
    Step("profiling", "9. Profiling your own code", profiling),
)
