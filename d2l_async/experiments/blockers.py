"""Implicit blockers: anything that needs a value makes the frontend wait (D2L §13.2.2).

``print(z)``, ``z.item()``, ``z.asnumpy()`` / ``z.numpy()``, ``float(z)`` and a tensor in an ``if``
all need the backend to finish ``z`` first.  This module measures what each costs per call, the
difference between converting a loss every step and once at the end, and collects the engine's
blocker report: every wait the frontend made, with its reason and the source line that caused it.

The book's figures (0.0340 s for ``asnumpy``, 0.0445 s for ``item``) timed a 1000×1000 matrix
product *plus* the conversion on its MXNet machine; :func:`run_blockers` repeats that exact
experiment (``book_style``) beside the pure per-call cost on a tiny array.  On CUDA the report comes
from ``torch.cuda.set_sync_debug_mode("warn")``.
"""

from __future__ import annotations

import contextlib
import io
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import statistics

from d2l_async import claims, config, lesson
from d2l_async.verdict import compare, compare_paired, similar
from d2l_async._words import fmt_time

from ._common import Setup, make_measurement, positive_int, resolve_backend, time_interleaved, time_runs
from .deadline import checkpoint
from ._show import Displayed, ran_on
from ._why import cpu_cause, machine_words
from .sizing import device_sizes
from d2l_async.trace import Trace
from d2l_async._args import TRACE_HINT, having, instance, integer

__all__ = ["BLOCKERS", "BLOCKER_DEMO", "BlockEvent", "BlockersResult", "run_blockers", "checks", "report_check",
           "SAME_COST", "EVERY_STEP", "EACH_WAITED"]

#: The blockers measured, in display order.
BLOCKERS = ("print", "item", "asnumpy", "numpy", "float", "bool")

#: The program whose blocker report :class:`BlockersResult` carries; each blocker on its own line,
#: so the report can point at the line (as it does in a reader's notebook cell).
BLOCKER_DEMO = """\
b = b + 1
print(b)
b = b + 1
b.sum().item()
b = b + 1
b.asnumpy()
b = b + 1
b.numpy()
b = b + 1
float(b.sum())
b = b + 1
if b.sum():
    pass
"""
_DEMO_FILE = "<blocker demo>"
#: Fewest runs of each book-style measurement (a product and one conversion: cheap; 15 pairs narrow the
#: interval of item / asnumpy to about the 0.8-1.25 the claim needs on a shared machine).
BOOK_REPEAT = 15


@dataclass(frozen=True)
class BlockEvent:
    """One wait of the frontend, as the blocker report lists it.

    Attributes:
        reason: why it waited (``"item"``, ``"print"``, ``"waitall"``, ...).
        source: the frontend source line that caused it (or the CUDA warning text).
        seconds: how long it waited (NaN when the source does not say).
    """

    reason: str
    source: str
    seconds: float


@dataclass(frozen=True)
class BlockersResult(Displayed):
    """Costs of the implicit blockers.

    Attributes:
        per_call: blocker name -> Measurement of one ``b = b + 1; blocker(b)`` step.
        baseline: the same step with no blocker (one barrier at the end of the loop).
        book_style: ``"asnumpy"``/``"item"`` -> Measurement of the book's ``b = a @ a`` plus that
            conversion (compare with the book's 0.0340 s / 0.0445 s, measured with MXNet).
        every_step: a loop of ``steps`` steps converting the loss to a float every step.
        once_at_end: the same loop keeping the losses as arrays and converting them at the end.
        report: the blocker report of one short run, one :class:`BlockEvent` per wait.
        trace: the trace the report came from.
        steps: loop length used for per-call costs.
        size: matrix side of the book-style run.
        backend, device, virtual: where it ran.
        machine: :class:`d2l_async.devices.Machine` read just before the run (``None``: unknown).
    """

    per_call: Mapping[str, Any]
    baseline: Any
    book_style: Mapping[str, Any]
    every_step: Any
    once_at_end: Any
    report: tuple[BlockEvent, ...]
    trace: Any
    steps: int
    size: int
    backend: str
    device: str
    virtual: bool
    machine: Any = None

    def cost(self, blocker: str) -> float:
        """Median seconds one call of ``blocker`` adds to a step (per-step time minus baseline)."""
        if blocker not in self.per_call:
            raise ValueError(f"unknown blocker {blocker!r}; measured: {tuple(self.per_call)}")
        return self.per_call[blocker].median - self.baseline.median

    def checks(self) -> list[lesson.Check]:
        """The checks of this run's claims (:func:`checks`)."""
        return checks(self)

    @property
    def book_reference(self) -> dict[str, float]:
        """The book's two numbers by the labels of :attr:`book_style` (for ``viz.plot_measurements(book=...)``)."""
        from .book import BOOK

        return {m.label: BOOK[f"blockers.{key}"].value for key, m in self.book_style.items()}

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        rows = [(f"{name}: per step, beyond no blocker", fmt_time(self.cost(name))) for name in self.per_call]
        rows += [(m.label, fmt_time(m.median)) for m in self.book_style.values()]
        rows += [(m.label, fmt_time(m.median)) for m in (self.every_step, self.once_at_end)]
        return (f"{ran_on(self.device, self.virtual)}; medians of {len(self.baseline.raw)} runs "
                f"({len(self.book_style['item'].raw)} of the book's product)", rows)


def _blocker_calls(kind: str) -> dict[str, Callable[[Any], Any]]:
    sink = io.StringIO()

    def do_print(b: Any) -> None:
        with contextlib.redirect_stdout(sink):
            print(b)
        sink.seek(0)
        sink.truncate()

    def do_if(b: Any) -> None:
        if b.sum():  # a tensor in an ``if``: bool() needs the value
            pass

    numpy_call = (lambda b: b.asnumpy()) if kind == "engine" else (lambda b: b.cpu().numpy())
    return {
        "print": do_print,
        "item": lambda b: b.sum().item(),
        "asnumpy": numpy_call,
        "numpy": (lambda b: b.numpy()) if kind == "engine" else (lambda b: b.cpu().numpy()),
        "float": lambda b: float(b.sum()),
        "bool": do_if,
    }


def run_blockers(
    *, steps: int | None = None, size: int | None = None, repeat: int | None = None, backend: str = "auto"
) -> BlockersResult:
    """Measure each blocker's cost, every-step vs once-at-end conversion, and the blocker report.

    Args:
        steps: steps of the per-call loops; default 1000 (quick mode 200).
        size: matrix side of the book-style run; default 1000 (quick mode 500), on CUDA this GPU's
            (:mod:`~d2l_async.experiments.sizing`).
        repeat: timed runs per measurement; default 5 (quick mode 2).
        backend: ``"auto"``, ``"engine"`` or ``"cuda"``.

    Returns:
        The frozen :class:`BlockersResult`: a :class:`Measurement` per blocker and for the baseline, the book-style
        and every-step vs once-at-end runs, the blocker report and its trace, the sizes, where it ran and the
        :class:`~d2l_async.devices.Machine` read before it.

    Raises:
        ValueError: bad counts or an unavailable backend.
    """
    steps = positive_int("steps", steps if steps is not None else config.scale(1000, 200), maximum=1_000_000)
    sized = size is None
    size = positive_int("size", size if size is not None else config.scale(1000, 500), maximum=8192)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(5, 2), maximum=1000)
    setup = resolve_backend(backend, n_devices=1)
    if sized and setup.backend == "cuda":  # a CPU's size is launch-bound on a GPU: this GPU's
        size = device_sizes().blockers
    import dataclasses

    from d2l_async.devices import machine

    here = machine(sample_s=0.05)
    r = _cuda(steps, size, repeat, setup) if setup.backend == "cuda" else _engine(steps, size, repeat, setup)
    return dataclasses.replace(r, machine=here)


def _measure_all(make: Callable[..., Any], barrier: Callable[[], None], calls: Mapping[str, Callable[[Any], Any]],
                 steps: int, size: int, repeat: int, setup: Setup,
                 gather: Callable[[list], list] | None = None) -> tuple[dict, Any, dict, Any, Any]:
    dev = setup.device

    def loop(blocker: Callable[[Any], Any] | None) -> Callable[[], None]:
        def run() -> None:
            b = make((1, 2), 1.0)
            for _ in range(steps):
                b = b + 1
                if blocker is not None:
                    blocker(b)
                checkpoint()
            barrier()
        return run

    per_call = {}
    for name, call in calls.items():
        raw = time_runs(loop(call), warmup=1, repeat=repeat)
        per_call[name] = make_measurement(f"{name}", [r / steps for r in raw], device=dev)
    baseline = make_measurement("no blocker", [r / steps for r in time_runs(loop(None), warmup=1, repeat=repeat)],
                                device=dev)

    a = make((size, size), None)
    book = {}
    for name, convert in (("asnumpy", calls["asnumpy"]), ("item", calls["item"])):
        def book_run(convert: Callable[[Any], Any] = convert) -> None:
            barrier()  # the book's Benchmark starts with an idle queue
            convert(a @ a)
        book[name] = book_run
    # one product each: cheap, so at least BOOK_REPEAT runs of each, interleaved (asnumpy, item, asnumpy,
    # ...): run i of one pairs with run i of the other, measured moments apart under the same load
    runs = time_interleaved(list(book.values()), warmup=1, repeat=max(repeat, BOOK_REPEAT))
    book = {name: make_measurement(f"b = a @ a; {name}", r, device=dev) for name, r in zip(book, runs)}

    w = make((64, 64), 0.01)
    x = make((64, 64), 1.0)
    n_loop = max(1, steps // 4)

    def every_step() -> None:
        losses = []
        for _ in range(n_loop):
            losses.append(float((x @ w).sum()))  # a blocker per step
            checkpoint()
        barrier()

    def once_at_end() -> None:
        losses = []
        for _ in range(n_loop):
            losses.append((x @ w).sum())
            checkpoint()
        gather(losses) if gather is not None else [float(l) for l in losses]  # one wait, then cheap reads
        barrier()

    # interleaved for the same reason: the two loops' runs pair up
    r_every, r_once = time_interleaved([every_step, once_at_end], warmup=1, repeat=repeat)
    m_every = make_measurement("convert every step", r_every, device=dev)
    m_once = make_measurement("convert once at the end", r_once, device=dev)
    return per_call, baseline, book, m_every, m_once


def _engine(steps: int, size: int, repeat: int, setup: Setup) -> BlockersResult:
    import torch

    from d2l_async.engine import make_engine

    with make_engine(workers=1, devices=("cpu:0",)) as eng:
        def make(shape: tuple[int, int], fill: float | None) -> Any:
            t = torch.rand(*shape) / shape[0] if fill is None else torch.full(shape, fill)
            return eng.array(t)

        calls = _blocker_calls("engine")
        per_call, baseline, book, every, once = _measure_all(make, eng.waitall, calls, steps, size, repeat, setup)
        eng.reset_trace()
        # a 1000×1000 b: each ``b + 1`` takes long enough that the blocker after it really waits
        # (the engine records a block only when the value was not ready yet)
        _run_demo(make((1000, 1000), 1.0))
        eng.waitall()
        trace = eng.trace().with_meta(device=setup.device, virtual=True, experiment="blockers")
    report = _report_from_trace(trace)
    return BlockersResult(per_call, baseline, book, every, once, report, trace, steps, size, "engine",
                          setup.device, True)


def _run_demo(b: Any, *, numpy_name: str = "numpy") -> None:
    """Run :data:`BLOCKER_DEMO` as if it were a reader's cell, so the engine attributes each wait
    to the demo's own lines (the engine skips frames inside ``d2l_async``)."""
    import linecache

    code = BLOCKER_DEMO.replace("b.asnumpy()", "b.cpu().numpy()").replace("b.numpy()", "b.cpu().numpy()") \
        if numpy_name == "cpu" else BLOCKER_DEMO
    lines = code.splitlines(keepends=True)
    linecache.cache[_DEMO_FILE] = (len(code), None, lines, _DEMO_FILE)
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, _DEMO_FILE, "exec"), {"__name__": "blocker_demo", "b": b})


def _report_from_trace(trace: Any) -> tuple[BlockEvent, ...]:
    blocks = trace.where(kind="block")
    return tuple(BlockEvent(str(blocks["reason"][i]), str(blocks["source"][i]),
                            float(blocks["end"][i] - blocks["start"][i])) for i in range(len(blocks)))


def gather_once(losses: list) -> list[float]:
    """The losses of a CUDA loop as floats with one copy to the host (one wait), not one per loss.

    ``[float(l) for l in losses]`` is one blocking device-to-host copy per element on a GPU (on the
    engine, the first ``float`` waits and the rest read ready values); stacking them first makes it one.

    Returns:
        The losses as Python floats, in order (``[]`` for none).
    """
    import torch

    return torch.stack(losses).tolist() if losses else []


def _cuda(steps: int, size: int, repeat: int, setup: Setup) -> BlockersResult:
    import torch

    from d2l_async.capture import capture

    dev = torch.device("cuda:0")

    def make(shape: tuple[int, int], fill: float | None) -> Any:
        return torch.rand(*shape, device=dev) / shape[0] if fill is None else torch.full(shape, fill, device=dev)

    calls = _blocker_calls("cuda")
    barrier = lambda: torch.cuda.synchronize(dev)  # noqa: E731
    per_call, baseline, book, every, once = _measure_all(make, barrier, calls, steps, size, repeat, setup,
                                                         gather=gather_once)

    def one_of_each() -> None:
        _run_demo(make((1, 2), 1.0), numpy_name="cpu")
        barrier()

    report = []
    previous = torch.cuda.get_sync_debug_mode()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            b = make((1, 2), 1.0)
            for name, call in calls.items():
                b = b + 1
                n = len(caught)
                t0 = time.perf_counter()
                call(b)
                dt = time.perf_counter() - t0
                text = "; ".join(str(w.message).splitlines()[0] for w in caught[n:]) or "no warning"
                report.append(BlockEvent(name, text, dt))
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    trace = capture(one_of_each, device="cuda").with_meta(device=setup.device, virtual=False, experiment="blockers")
    return BlockersResult(per_call, baseline, book, every, once, tuple(report), trace, steps, size, "cuda",
                          setup.device, False)


# ---------------------------------------------------------------- did the lesson hold on this run?
SAME_COST = claims.claim(
    "04.item-asnumpy", notebooks=("04_blockers",),
    sentence="item and asnumpy cost about the same (both wait for the product)",
    book="§13.2.2: b.asnumpy() 0.0340 s and b.sum().item() 0.0445 s after b = np.dot(a, a), one run each",
    quantity="item / asnumpy of the book's product-then-convert, paired runs",
    rule="similar: the interval wholly inside 0.80–1.25")
EVERY_STEP = claims.claim(
    "04.every-step", notebooks=("04_blockers",),
    sentence="converting the loss every step is slower than once at the end",
    book="§13.2.2: each blocker makes the frontend wait for the backend",
    quantity="every step / once at the end, wall time of the same loop, paired runs",
    rule="compare: the interval wholly above 1")
EACH_WAITED = claims.claim(
    "04.each-waited", notebooks=("04_blockers",),
    sentence="each of the {expected} blockers made the frontend wait for its product",
    book="§13.2.2: print, item, asnumpy, float and if all need the value",
    quantity="source lines with a recorded wait of the frontend (the trace)",
    rule="fact: as many as the blockers", says="{lines} source lines waited ({reasons})")


def checks(r: BlockersResult) -> list[lesson.Check]:
    """Whether the notebook's lessons held on this run, from its numbers only.

    Returns:
        The checks of :data:`SAME_COST` and :data:`EVERY_STEP`.
    """
    having("r", r, ("book_style", "per_call"), what="a BlockersResult")
    item, asnumpy = r.book_style["item"], r.book_style["asnumpy"]
    same = similar(item.raw, asnumpy.raw, tolerance=0.25, names=("item", "asnumpy"), paired=_paired(item, asnumpy))
    if r.backend == "cuda":
        s_cause, s_facts = lesson.Cause.GPU, {"gpu": _cuda_copy_reason(r, same.ratio)}
    elif same.holds is None:
        s_cause, s_facts = lesson.Cause.SPREAD, {"runs": f"{same.n_a} paired runs"}
    else:
        s_cause, s_facts = cpu_cause(r.machine, "both conversions")
    out = [SAME_COST.check(same, cause=s_cause, facts=s_facts,
                           detail=f"the book's 0.0445 s / 0.0340 s = 1.31, one run each; medians "
                                  f"{fmt_time(item.median)} and {fmt_time(asnumpy.median)}")]
    n_loop = max(1, r.steps // 4)
    paired = _paired(r.every_step, r.once_at_end)
    verdict = (compare_paired if paired else compare)(r.every_step.raw, r.once_at_end.raw, less=False,
                                                      names=("every step", "once at the end"))
    cause, facts = _every_step_cause(r, verdict, n_loop)
    out.append(EVERY_STEP.check(verdict, cause=cause, facts=facts,
                                detail=f"{n_loop} steps per loop; medians {fmt_time(r.every_step.median)} vs "
                                       f"{fmt_time(r.once_at_end.median)}"))
    return out


def _every_step_cause(r: BlockersResult, v: Any, n_loop: int) -> tuple[Any, dict[str, Any]]:
    """Why converting every step was not slower, from the run: one step per loop (the two loops are the
    same program), a naive engine (no queue to fill), the spread, the GPU's launches, the CPUs, or a step
    too short to leave the queue anything to hide."""
    if n_loop < 2:
        return lesson.Cause.FEW_STEPS, {"steps": f"{n_loop} step"}
    if r.trace is not None and r.trace.meta.get("engine") == "naive":
        return lesson.Cause.NO_WORKER_THREAD, {}
    if r.backend == "cuda":  # the GPU's terms, for a can't tell too: no worker thread to blame
        return lesson.Cause.GPU, {"gpu": "each step's kernels are shorter than their launches: the GPU waits for "
                                         "the CPU either way"}
    if v.holds is None:
        return lesson.Cause.SPREAD, {"runs": f"{v.n_a} paired runs" if v.n_a == v.n_b else f"{v.n_a} vs {v.n_b} runs"}
    if r.machine is not None and float(r.machine.spare_cpus) < 1:
        return cpu_cause(r.machine, "the frontend and the worker")
    return lesson.Cause.TOO_SMALL, {"small": "a step", "took": fmt_time(r.once_at_end.median / n_loop),
                                    "beside": "the frontend's own cost per step"}


def _paired(a: Any, b: Any) -> bool:
    """Runs measured in rounds (:func:`~d2l_async.experiments._common.time_interleaved`) pair up: the same
    number of each (a synthetic result with uneven runs is compared unpaired)."""
    return len(a.raw) == len(b.raw) >= 2


def _cuda_copy_reason(r: BlockersResult, ratio: float) -> str:
    """Why item and asnumpy differ on a GPU: they copy different amounts to the host."""
    slower = "asnumpy" if ratio < 1 else "item"
    return (f"asnumpy copies the whole {r.size}x{r.size} matrix into pageable memory, item 4 bytes into pinned "
            f"memory; {slower} took longer by its copy")


def report_check(trace: Any, *, expected: int, size: int, machine: Any = None) -> lesson.Check:
    """The check of :data:`EACH_WAITED`: ``expected`` source lines of a trace made the frontend wait (its
    blocker report).

    Returns:
        The :class:`~d2l_async.lesson.Check` (not displayed).
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    if machine is not None:
        having("machine", machine, ("usable_cpus", "spare_cpus"), what="a d2l_async.devices.machine() snapshot or None")
    expected = integer("expected", expected, minimum=0)
    blocks = trace.where(kind="block")
    sources = {str(s) for s, r in zip(blocks["source"], blocks["reason"]) if str(r) != "waitall"}
    reasons = sorted({str(r) for r in blocks["reason"]} - {"waitall"})
    ops = trace.where(kind="op")
    if trace.meta.get("engine") == "naive":
        cause, facts = lesson.Cause.NO_WORKER_THREAD, {}
    elif machine is not None and float(machine.usable_cpus) < 2:
        cause, facts = cpu_cause(machine, "the frontend and the worker")
    else:
        took = float(statistics.median(ops["end"] - ops["start"])) if len(ops) else 0.0
        cause, facts = lesson.Cause.TOO_SMALL, {"small": f"a {size}x{size} product", "took": fmt_time(took),
                                                "beside": "the frontend's way to the blocker"}
    return EACH_WAITED.check(len(sources) >= expected, cause=cause,
                             facts={**facts, "expected": expected, "lines": len(sources),
                                    "reasons": ", ".join(reasons) or "none"},
                             numbers={"lines": len(sources), "expected": expected, "size": size})


def _example(every: float, once: float, *, item: float = 0.03, asnumpy: float = 0.03, steps: int = 40,
             machine: Any = None, engine: str = "threaded", scatter: float = 0.0) -> BlockersResult:
    """A synthetic result with these medians (seconds; three paired runs each, 2% apart; item's runs
    ``scatter`` (relative) apart the other way)."""
    from d2l_async.trace import Lane, LaneRole

    from ._common import make_measurement

    runs = lambda x: [x, x * 1.02, x * 0.98]  # noqa: E731
    m = lambda label, x: make_measurement(label, runs(x))  # noqa: E731
    trace = Trace.from_events([], [Lane("frontend", LaneRole.FRONTEND)]).with_meta(engine=engine)
    return BlockersResult({"item": m("item", 1e-5)}, m("no blocker", 1e-6),
                          {"asnumpy": m("b = a @ a; asnumpy", asnumpy),
                           "item": make_measurement("b = a @ a; item", [item, item * (1 - scatter), item * (1 + scatter)])},
                          m("convert every step", every), m("convert once at the end", once), (), trace, steps, 64,
                          "engine", "example", True, machine)


def _blocked_trace(waits: int, *, engine: str = "threaded") -> Trace:
    """A trace with ``waits`` blocker waits, each on its own source line, after a 10 ms product each."""
    from d2l_async.trace import Event, Lane, LaneRole

    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", True, 0)]
    ev = []
    for k in range(5):
        ev.append(Event("cpu:0 worker 0", "op", "matmul", 0.02 * k, 0.02 * k + 0.01, issue=0.02 * k, device="cpu:0"))
        if k < waits:
            ev.append(Event("frontend", "block", "item", 0.02 * k + 0.001, 0.02 * k + 0.01, reason="item",
                            source=f"<cell>:{k + 1}"))
    return Trace.from_events(ev, lanes).with_meta(engine=engine)


def _register() -> None:
    from ._why import example_machine

    busy, spare = example_machine(1, 0), example_machine(4, 4)
    claims.falsifier(SAME_COST, "item twice as slow as asnumpy",
                     lambda: checks(_example(0.02, 0.01, item=0.06, asnumpy=0.03, machine=spare))[0])
    claims.counterfactual(SAME_COST, "item and asnumpy 20–30% apart, scattered", lesson.Cause.SPREAD,
                          lambda: checks(_example(0.02, 0.01, item=0.037, asnumpy=0.03, scatter=0.3, machine=spare))[0])
    claims.falsifier(EVERY_STEP, "converting every step as fast as once",
                     lambda: checks(_example(0.01, 0.01, machine=spare))[1])
    claims.counterfactual(EVERY_STEP, "steps=4: one step per loop", lesson.Cause.FEW_STEPS,
                          lambda: checks(_example(0.01, 0.01, steps=4, machine=spare))[1])
    claims.counterfactual(EVERY_STEP, "a naive engine (no worker thread)", lesson.Cause.NO_WORKER_THREAD,
                          lambda: checks(_example(0.01, 0.01, machine=spare, engine="naive"))[1])
    claims.counterfactual(EVERY_STEP, "one usable CPU, busy", lesson.Cause.NO_SPARE_CPU,
                          lambda: checks(_example(0.008, 0.01, machine=busy))[1])
    claims.counterfactual(EVERY_STEP, "four spare CPUs", lesson.Cause.TOO_SMALL,
                          lambda: checks(_example(0.008, 0.01, machine=spare))[1])
    claims.falsifier(EACH_WAITED, "two of the five blockers found their value ready",
                     lambda: report_check(_blocked_trace(3), expected=5, size=64, machine=spare))
    claims.counterfactual(EACH_WAITED, "a naive engine (no worker thread)", lesson.Cause.NO_WORKER_THREAD,
                          lambda: report_check(_blocked_trace(0, engine="naive"), expected=5, size=64, machine=spare))
    claims.counterfactual(EACH_WAITED, "one usable CPU", lesson.Cause.NO_SPARE_CPU,
                          lambda: report_check(_blocked_trace(3), expected=5, size=64, machine=busy))


_register()
