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

from d2l_async import config, lesson
from d2l_async.verdict import compare, compare_paired, similar
from d2l_async._words import added, fmt_time, ratio_words

from ._common import Setup, make_measurement, positive_int, resolve_backend, time_interleaved, time_runs
from .deadline import checkpoint
from .sizing import device_sizes
from ._why import machine_words
from d2l_async.trace import Trace
from d2l_async._args import TRACE_HINT, having, instance

__all__ = ["BLOCKERS", "BLOCKER_DEMO", "BlockEvent", "BlockersResult", "run_blockers", "checks", "report_check"]

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
class BlockersResult:
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
def checks(r: BlockersResult) -> list[lesson.Check]:
    """Whether the notebook's lessons held on this run, from its numbers only.

    Each explanation is written for the outcome it explains: a ✘ states which way the numbers went
    and the measured machine; a can't tell states the spread (from the verdict) and what would
    decide it, never a conclusion.
    """
    having("r", r, ("book_style", "per_call"), what="a BlockersResult")
    out = []
    a, i = r.book_style["asnumpy"].min, r.book_style["item"].min
    runs = min(len(r.book_style["asnumpy"].raw), len(r.book_style["item"].raw))
    conv = max(r.cost("asnumpy"), r.cost("item"))
    product = min(a, i)
    out.append(lesson.check(
        "in the book's experiment the product dominates: the conversion adds little",
        # the conversion under a fifth of the product; one number each, so decided beyond a factor 2 of that
        compare(max(conv, 1e-9), product, by=0.2, names=("conversion", "product + conversion"))
        if product > 0 else False,
        shown=f"product + conversion {fmt_time(a)} (asnumpy) and {fmt_time(i)} (item), fastest of {runs} "
              f"runs each; a conversion alone {added(conv)}",
        otherwise=_product_reason_cuda(r, conv, product) if r.backend == "cuda" else (
                  f"the {r.size}x{r.size} product took only ~{fmt_time(product)} here, so the conversion's "
                   f"{fmt_time(conv)} is not small beside it ({machine_words(r.machine)}). Use a larger matrix "
                   "(quick mode shrinks it)." if product > 0 else "no product was timed: rerun run_blockers()"),
        unclear=_product_reason_cuda(r, conv, product, unclear=True) if r.backend == "cuda" else (
                f"the conversion's {fmt_time(conv)} is {conv / product:.0%} of the product's ~{fmt_time(product)}: "
                 "one estimate each cannot say whether that is under a fifth. A larger matrix makes the product "
                 "dominate clearly" if product > 0 else "")))
    # One measurement for one named ratio: the medians, as the notebook prints them, decided against
    # the spread of the repeats, in the same direction as printed (item / asnumpy).
    am, im = r.book_style["asnumpy"].median, r.book_style["item"].median
    spread = max(r.book_style["asnumpy"].iqr / am if am else 0, r.book_style["item"].iqr / im if im else 0)
    paired = _paired(r.book_style["item"], r.book_style["asnumpy"])
    same = similar(r.book_style["item"].raw, r.book_style["asnumpy"].raw, tolerance=0.25, names=("item", "asnumpy"),
                   paired=paired)
    how = "median of the runs' paired ratios" if paired else "ratio of the medians"
    out.append(lesson.check(
        "item and asnumpy cost about the same: both wait for the same product",
        same,
        shown=f"{ratio_words(same)} ({how}, {runs} runs each; the book's 0.0445 s / 0.0340 s = 1.31, one run each)",
        otherwise=_cuda_copy_reason(r, same.ratio) if r.backend == "cuda" else (
                   f"the two differ by {abs(same.ratio - 1):.0%} beyond their spread (each varied by up to "
                   f"{spread:.0%} between repeats; {machine_words(r.machine)}): other work on the CPU moved one of "
                   "them. Rerun, or raise repeat."),
        unclear=(f"they differ by {abs(same.ratio - 1):.0%} and each varied by up to {spread:.0%} between repeats "
                 f"({machine_words(r.machine)}): raise repeat, or rerun on a quieter machine")))
    n_loop = max(1, r.steps // 4)
    every, once = r.every_step.median, r.once_at_end.median
    paired = _paired(r.every_step, r.once_at_end)
    verdict = (compare_paired if paired else compare)(r.every_step.raw, r.once_at_end.raw, less=False,
                                                      names=("every step", "once at the end"))
    per_step = f"a step took {fmt_time(every / n_loop)} converting every step and {fmt_time(once / n_loop)} once"
    out.append(lesson.check(
        "converting the loss every step is slower than converting once at the end",
        verdict,
        shown=f"every step {fmt_time(every)} vs once at the end {fmt_time(once)} (medians; {ratio_words(verdict)}, "
              f"{'median of the paired runs' if paired else 'ratio of the medians'}; {n_loop} steps)",
        otherwise=f"converting every step was the faster loop here: {per_step}. " + _every_step_reason(r, once / n_loop),
        unclear=f"{per_step}. " + _every_step_reason(r, once / n_loop, decided=False)
        + " More repeats (repeat=) or more steps decide it.",
    ))
    return out


def _paired(a: Any, b: Any) -> bool:
    """Runs measured in rounds (:func:`~d2l_async.experiments._common.time_interleaved`) pair up: the same
    number of each (a synthetic result with uneven runs is compared unpaired)."""
    return len(a.raw) == len(b.raw) >= 2


def _cuda_copy_reason(r: BlockersResult, ratio: float) -> str:
    """Why item and asnumpy differ on a GPU: they copy different amounts to the host."""
    mb = r.size * r.size * 4 / 1e6
    slower = "asnumpy" if ratio < 1 else "item"
    return (f"on a GPU the two conversions do not copy the same thing: asnumpy (b.cpu().numpy()) copies the whole "
            f"{r.size}x{r.size} float32 matrix, {mb:.1f} MB, into pageable host memory, a synchronizing copy at the "
            f"host link's speed, while item copies the 4 bytes of b.sum() into pinned host memory and then "
            f"synchronizes the stream. Both wait for the product first; {slower} took longer by what its copy costs "
            "(the timeline shows the copy)")


def _round_trip(trace: Any) -> float:
    """Median seconds the CPU waited in one stream synchronize of the blocker demo's trace (NaN: none)."""
    import statistics

    if trace is None:
        return float("nan")
    blocks = trace.where(kind="block")
    waits = [float(e - s) for n, s, e in zip(blocks["name"], blocks["start"], blocks["end"])
             if str(n) == "cudaStreamSynchronize"]
    return statistics.median(waits) if waits else float("nan")


def _product_reason_cuda(r: BlockersResult, conv: float, product: float, *, unclear: bool = False) -> str:
    """Why a conversion was not small beside the book's product on a GPU: the product is a kernel, the
    conversion a round trip between the CPU and the GPU, and neither is a CPU count."""
    trip = _round_trip(r.trace)
    waits = f" (each of the blocker demo's stream synchronizes held the CPU {fmt_time(trip)})" if trip == trip else ""
    share = conv / product if product > 0 else float("inf")
    head = (f"on the GPU the {r.size}x{r.size} product with its conversion took ~{fmt_time(product)}, and a "
            f"conversion alone {added(conv)} ({share:.0%} of it): a copy to the host (pinned memory for item, "
            f"pageable for asnumpy) and a cudaStreamSynchronize, a round trip between the CPU and the GPU{waits} "
            "that does not shrink with the product")
    if unclear:
        return (f"{head}. Between a tenth and two fifths, one estimate each cannot say whether it is under a fifth; "
                "a larger matrix (size=) makes the product dominate clearly")
    return (f"{head}. The GPU computes this product in the time of {1 / share:.1f} conversions: a larger matrix "
            "(size=; quick mode shrinks it) makes the product dominate")


def _every_step_reason(r: BlockersResult, step_s: float, *, decided: bool = True) -> str:
    """What limits the gain of converting once, from the machine and the step's size; a hypothesis
    about the mechanism, stated without an outcome (``decided=False``: for a can't tell)."""
    m = r.machine
    if r.backend == "cuda":  # CUDA's terms, not the engine's threads
        return (f"a step costs ~{fmt_time(step_s)} with one copy at the end: each step's 64x64 product and sum are "
                "kernels of a few µs, shorter than their launches, so the GPU waits for the CPU's next launch "
                "either way and the launch queue never fills; a synchronizing copy per step then adds only its own "
                "round trip. With larger matrices the GPU becomes the slower side and the queue has work to hide.")
    if m is not None and m.spare_cpus < 1 and r.backend == "engine":
        return (f"The frontend and the engine's worker had no CPU to themselves ({machine_words(m)}): they take "
                "turns, so a full queue has little to overlap"
                + (", and a wait per step has little to cost" if decided else "")
                + ". The queue hides work only where the backend has its own processor: a spare core, or a GPU.")
    return (f"Each step's 64x64 product takes only ~{fmt_time(step_s)}, so the frontend's per-step cost dominates "
            f"({machine_words(m)}). On a GPU a wait is also a device round trip; with longer steps (larger "
            "matrices) the queue has more to hide.")


def report_check(trace: Any, *, expected: int, size: int, machine: Any = None) -> lesson.Check:
    """Check that ``expected`` source lines of a trace made the frontend wait (its blocker report)."""
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    blocks = trace.where(kind="block")
    sources = {str(s) for s, r in zip(blocks["source"], blocks["reason"]) if str(r) != "waitall"}
    reasons = sorted({str(r) for r in blocks["reason"]} - {"waitall"})
    return lesson.check(
        f"each of the {expected} blockers made the frontend wait for its product",
        len(sources) >= expected,
        shown=f"{len(sources)} source lines made the frontend wait ({', '.join(reasons) or 'none'})",
        otherwise=(f"a product of {size}x{size} was already done when the line that needed it ran (the engine "
                   f"records a wait only when the value is not ready; {machine_words(machine)}). Use a larger size."))
