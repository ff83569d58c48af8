"""The notebooks' lessons about plain PyTorch in ``asynchronous()``, as checks of measured numbers.

The notebooks run the plain torch code in their own cells -- that code is the point -- and pass
what they measured here; each function returns :class:`d2l_async.lesson.Check` objects (not
displayed: ``lesson.show(...)`` does that), computed from those numbers alone, so they are
testable with synthetic numbers and cannot contradict what the notebook prints beside them.
``machine`` is :func:`d2l_async.devices.machine`'s snapshot: a check that did not hold explains
itself with the usable CPUs and the load it was measured under.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

from .. import claims, lesson
from ..verdict import compare
from .._words import fmt_time
from ..trace import Trace
from .._args import TRACE_HINT, having, instance, integer, number, samples, sequence

__all__ = ["returned_before_done", "narrow_waits", "blockers_recorded", "increments", "largest_stall"]


def _at(source: str) -> str:
    """`` (line 8)`` for a source ``"In[3]:8: b.item()"`` or ``"/tmp/x.py:8"``; the source itself otherwise."""
    m = re.search(r":(\d+)(?=:|$)", str(source))
    return f" (line {m.group(1)})" if m else (f" ({source})" if source else "")


PT_RETURNS = claims.claim(
    "01.pt-returns", notebooks=("01_asynchrony",),
    sentence="plain torch: the loop returns before the products are computed",
    book="§13.2.1, PyTorch: the frontend returns before the GPU's kernels are done",
    quantity="when the loop returned, as a share of when the barrier returned (one run)",
    rule="fact: under a quarter", says="{n} queued in {returned}, done after {finished}")
PT_NARROW = claims.claim(
    "03.pt-narrow", notebooks=("03_barriers",),
    sentence="with two workers, z.item() waits for z only",
    book="§13.2.2: a wait for one value need not wait for unrelated work",
    quantity="when z.item() returned, as a share of when synchronize() returned (one run, two workers)",
    rule="fact: under a half", says="z.item() after {item}, synchronize() after {done}")
PT_IN_ORDER = claims.claim(
    "03.pt-one-worker", notebooks=("03_barriers",), headline=False,
    sentence="with one worker, like one CUDA stream, z.item() waits for everything before z",
    book="a CUDA stream runs its kernels in program order",
    quantity="when z.item() returned, as a share of when synchronize() returned (one run, one worker)",
    rule="fact: at least 0.8", says="z.item() after {item}, synchronize() after {done}")
PT_WAITED = claims.claim(
    "04.pt-each-waited", notebooks=("04_blockers",), headline=False,
    sentence="in plain torch each blocker waited for its product",
    book="§13.2.2: print, item, numpy, float, bool and nonzero all need the value",
    quantity="the frontend's recorded waits, by reason, against the blockers of the cell",
    rule="fact: every blocker's wait recorded", says="{waits} waits, each with its line")
PT_FASTER = claims.claim(
    "05.pt-faster", notebooks=("05_sync_vs_async",),
    sentence="asynchronous beats synchronous in plain torch too",
    book="§13.2.3: 10,000 × y = x + 1, synchronous against asynchronous",
    quantity="synchronous / asynchronous wall time, every run", rule="compare: the interval wholly above 1")


def _cpu(machine: Any, threads: str) -> tuple[Any, dict[str, Any]]:
    """Why ``threads`` did not run side by side, from the machine snapshot."""
    if machine is None:
        return lesson.Cause.MISSING, {"missing": "the machine was not recorded"}
    cpus = (f"{machine.usable_cpus:g} usable CPU{'s' if machine.usable_cpus != 1 else ''}, "
            f"{machine.spare_cpus:.1f} spare")
    few = float(machine.usable_cpus) < 2 or float(machine.spare_cpus) < 1.5
    return (lesson.Cause.NO_SPARE_CPU if few else lesson.Cause.INTERPRETER_LOCK), {"cpus": cpus, "threads": threads}


def returned_before_done(returned_s: float, finished_s: float, eager_s: float, n: int,
                         machine: Any = None) -> list[lesson.Check]:
    """``n`` queued products: the loop returned after ``returned_s``, the barrier after ``finished_s``
    (both from the loop's start); ``eager_s`` (eager torch, the same work) is kept in the detail.

    Returns:
        The check of :data:`PT_RETURNS`, in a list.
    """
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    returned_s, finished_s, eager_s = (number(k, v, minimum=0) for k, v in (
        ("returned_s", returned_s), ("finished_s", finished_s), ("eager_s", eager_s)))
    cause, facts = _cpu(machine, "the frontend and the worker")
    return lesson.CheckList([PT_RETURNS.check(returned_s < 0.25 * finished_s, cause=cause, facts={
        **facts, "n": n, "returned": fmt_time(returned_s), "finished": fmt_time(finished_s)},
        detail=f"eager torch, no queue: {fmt_time(eager_s)}",
        numbers={"returned_s": returned_s, "finished_s": finished_s, "eager_s": eager_s})])


def narrow_waits(item_two_s: float, done_two_s: float, item_one_s: float, done_one_s: float,
                 machine: Any = None) -> list[lesson.Check]:
    """A long chain of unrelated products, then a tiny ``z``: ``item_*`` is when ``z.item()``
    returned, ``done_*`` when the barrier returned (from the chain's start), on two workers and
    on one.

    Returns:
        The checks of :data:`PT_NARROW` and :data:`PT_IN_ORDER`.
    """
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    item_two_s, done_two_s, item_one_s, done_one_s = (number(k, v, minimum=0) for k, v in (
        ("item_two_s", item_two_s), ("done_two_s", done_two_s), ("item_one_s", item_one_s), ("done_one_s", done_one_s)))
    cause, facts = _cpu(machine, "the two workers")
    return lesson.CheckList([
        PT_NARROW.check(item_two_s < 0.5 * done_two_s, cause=cause,  # two instants of the same run: a fact
                        facts={**facts, "item": fmt_time(item_two_s), "done": fmt_time(done_two_s)}),
        PT_IN_ORDER.check(item_one_s >= 0.8 * done_one_s, cause=lesson.Cause.BUG, facts={
            "item": fmt_time(item_one_s), "done": fmt_time(done_one_s), "bug": "ops ran out of order on one worker"}),
    ])


def blockers_recorded(blocks: Iterable[tuple[str, str, float]], expected: Iterable[str],
                      product_s: float, machine: Any = None) -> list[lesson.Check]:
    """``blocks``: ``(reason, source, seconds)`` of the frontend's waits in the trace; ``expected``
    the reasons the cell's blockers should have caused, once per blocker (``float(t)`` and
    ``bool(t)`` are ``"item"`` too: all three read one number); ``product_s`` one product's
    eager time, shown for scale.  A wait is recorded only when the value was not ready yet.

    Returns:
        The check of :data:`PT_WAITED`, in a list.
    """
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    blocks = [b for b in sequence("blocks", blocks, what="(reason, source, seconds) tuples")
              if _block("blocks", b)[0] != "waitall"]
    expected = [instance("expected", r, str, what="blocker reason (str)")
                for r in sequence("expected", expected, what="blocker reasons (str)")]
    product_s = number("product_s", product_s, minimum=0)
    need, have = Counter(expected), Counter(r for r, _, _ in blocks)
    missing = [f"{r} ({have[r]} of {k})" for r, k in need.items() if have[r] < k]
    unnamed = [r for r, src, _ in blocks if not src]
    if unnamed:
        cause, facts = lesson.Cause.BUG, {"bug": f"waits without a source line: {', '.join(unnamed)}"}
    else:
        cause, facts = _cpu(machine, "the frontend and the worker")
    return lesson.CheckList([PT_WAITED.check(
        not missing and not unnamed and bool(blocks), cause=cause, facts={**facts, "waits": len(blocks)},
        detail=", ".join(f"{r} {fmt_time(s)}{_at(src)}" for r, src, s in blocks)
        + f"; one product: {fmt_time(product_s)} eagerly" + (f"; not recorded: {', '.join(missing)}" if missing else ""),
        numbers={"waits": len(blocks), "lines": len({src for _, src, _ in blocks if src}), "product_s": product_s,
                 **{f"recorded {r}": have[r] for r in need}, **{f"expected {r}": k for r, k in need.items()}})])


def _block(name: str, b: Any) -> tuple[str, str, float]:
    if (not isinstance(b, (tuple, list)) or len(b) != 3 or not isinstance(b[0], str)
            or isinstance(b[2], bool) or not hasattr(b[2], "__float__")):
        raise TypeError(f"{name} must hold (reason, source, seconds) tuples, got {b!r}")
    return b


def largest_stall(trace: Any, loops: tuple[int, ...] = ()) -> tuple[float, float]:
    """``(seconds, share)``: the longest gap between two consecutive frontend pushes of a trace, and
    its share of the span of the loop it fell in (0, 0 without two pushes).  ``loops``: the push
    counts of the timed loops that end the trace, in order (e.g. ``(n, n)``); gaps between loops and
    before them (untimed set-up) are not counted.  One stall that is most of a loop is a pause of the
    whole process (Python's garbage collector, the OS), not a per-op cost."""
    loops = tuple(integer("loops", k, minimum=0) for k in sequence("loops", loops, what="push counts (int)"))
    if trace is None:
        return 0.0, 0.0
    instance("trace", trace, Trace, what="d2l_async.trace.Trace or None", hint=TRACE_HINT)
    pushes = trace.where(kind="launch")
    starts = sorted(float(x) for x in pushes["start"])
    if loops:
        starts = starts[-sum(loops):]
        segments, i = [], 0
        for k in loops:
            segments.append(starts[i:i + k])
            i += k
    else:
        segments = [starts]
    worst, share = 0.0, 0.0
    for seg in segments:
        if len(seg) < 2:
            continue
        gap = max(b - a for a, b in zip(seg, seg[1:]))
        span = seg[-1] - seg[0]
        if gap > worst:
            worst, share = gap, (gap / span if span > 0 else 0.0)
    return worst, share


def increments(sync_s: Any, async_s: Any, eager_s: Any, n: int, machine: Any = None, *,
               trace: Any = None) -> list[lesson.Check]:
    """The book's ``n`` x ``y = x + 1``: total seconds synchronous (a barrier after each op),
    asynchronous (one barrier at the end), and eager torch, each one run or a sequence of repeated
    runs (decided against their spread); ``trace``: the runtime's trace, read for the largest single
    stall when one stall decides the result.

    Returns:
        The check of :data:`PT_FASTER`, in a list (eager torch's time in its detail).
    """
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    integer("n", n, minimum=1)
    import statistics

    runs = [tuple(samples(k, v, minimum=0, what="seconds"))
            for k, v in (("sync_s", sync_s), ("async_s", async_s), ("eager_s", eager_s))]
    sync_runs, async_runs, eager_runs = runs
    sync_m, async_m, eager_m = (statistics.median(r) for r in runs)
    loops = (n,) * (len(sync_runs) + len(async_runs))  # the trace ends with the timed loops, in order
    stall, share = largest_stall(trace, loops)
    v = compare(sync_runs, async_runs, less=False, names=("synchronous", "asynchronous"))
    if share >= 0.3:  # one pause of the whole process decided it, not the worker's share of the CPU
        cause, facts = lesson.Cause.TRACE, {"seen": f"one stall of {fmt_time(stall)}, {share:.0%} of its loop"}
    elif v.holds is None:
        cause, facts = lesson.Cause.SPREAD, {"runs": f"{len(sync_runs)} vs {len(async_runs)} runs"}
    else:
        cause, facts = _cpu(machine, "the frontend and the worker")
    return lesson.CheckList([PT_FASTER.check(v, cause=cause, facts=facts, detail=(
        f"per op: synchronous {fmt_time(sync_m / n)}, asynchronous {fmt_time(async_m / n)}, eager torch "
        f"{fmt_time(eager_m / n)}"), numbers={"stall_s": stall, "stall_share": share})])


def _register() -> None:
    from .._machine import Machine

    busy = Machine(1.0, 1, None, 1, 1.0, 8 << 30, None, (), 1.0)
    spare = Machine(4.0, 4, None, 4, 0.0, 8 << 30, None, (), 0.0)
    claims.falsifier(PT_RETURNS, "the loop returned as the products were done",
                     lambda: returned_before_done(0.9, 1.0, 1.0, 10, spare)[0])
    claims.counterfactual(PT_RETURNS, "one usable CPU, busy", lesson.Cause.NO_SPARE_CPU,
                          lambda: returned_before_done(0.9, 1.0, 1.0, 10, busy)[0])
    claims.counterfactual(PT_RETURNS, "four spare CPUs", lesson.Cause.INTERPRETER_LOCK,
                          lambda: returned_before_done(0.9, 1.0, 1.0, 10, spare)[0])
    claims.falsifier(PT_NARROW, "z.item() as late as the barrier", lambda: narrow_waits(1.0, 1.0, 1.0, 1.0, busy)[0])
    claims.counterfactual(PT_NARROW, "one usable CPU, busy", lesson.Cause.NO_SPARE_CPU,
                          lambda: narrow_waits(1.0, 1.0, 1.0, 1.0, busy)[0])
    claims.falsifier(PT_IN_ORDER, "z.item() long before the barrier on one worker",
                     lambda: narrow_waits(0.1, 1.0, 0.1, 1.0, busy)[1])
    claims.counterfactual(PT_IN_ORDER, "z.item() long before the barrier on one worker", lesson.Cause.BUG,
                          lambda: narrow_waits(0.1, 1.0, 0.1, 1.0, busy)[1])
    three = [("print", "<cell>:1", 0.01), ("item", "<cell>:2", 0.01), ("numpy", "<cell>:3", 0.01)]
    claims.falsifier(PT_WAITED, "two of five blockers found their value ready",
                     lambda: blockers_recorded(three, ["print", "item", "numpy", "item", "item"], 0.01, spare)[0])
    claims.counterfactual(PT_WAITED, "the same on one busy CPU", lesson.Cause.NO_SPARE_CPU,
                          lambda: blockers_recorded(three, ["print", "item", "numpy", "item", "item"], 0.01, busy)[0])
    claims.counterfactual(PT_WAITED, "a wait without its source line", lesson.Cause.BUG, lambda: blockers_recorded(
        [("print", "", 0.01)], ["print"], 0.01, spare)[0])
    claims.falsifier(PT_FASTER, "asynchronous as slow as synchronous",
                     lambda: increments([1.0, 1.01, 0.99], [1.0, 0.99, 1.01], [0.1] * 3, 1000, spare)[0])
    claims.counterfactual(PT_FASTER, "synchronous faster, one busy CPU", lesson.Cause.NO_SPARE_CPU,
                          lambda: increments([1.0, 1.01, 0.99], [2.0, 1.99, 2.01], [0.1] * 3, 1000, busy)[0])
    claims.counterfactual(PT_FASTER, "runs that scatter across 1", lesson.Cause.SPREAD,
                          lambda: increments([1.0, 1.3, 0.8], [1.1, 0.9, 1.2], [0.1] * 3, 1000, busy)[0])


_register()
