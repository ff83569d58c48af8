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

from .. import lesson
from ..verdict import compare, similar
from .._words import fmt_time
from ..trace import Trace
from .._args import TRACE_HINT, having, instance, integer

__all__ = ["returned_before_done", "narrow_waits", "blockers_recorded", "increments", "largest_stall"]


def _at(source: str) -> str:
    """`` (line 8)`` for a source ``"In[3]:8: b.item()"`` or ``"/tmp/x.py:8"``; the source itself otherwise."""
    m = re.search(r":(\d+)(?=:|$)", str(source))
    return f" (line {m.group(1)})" if m else (f" ({source})" if source else "")


def _load(machine: Any) -> str:
    return (f"{machine.usable_cpus:g} usable CPU(s), load average {machine.load_avg:.1f}"
            if machine is not None else "an unknown load")


def returned_before_done(returned_s: float, finished_s: float, eager_s: float, n: int,
                         machine: Any = None) -> list[lesson.Check]:
    """``n`` queued products: the loop returned after ``returned_s``, the barrier after
    ``finished_s`` (both from the loop's start); eager torch took ``eager_s`` for the same work."""
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    return [
        lesson.check(
            "plain torch in asynchronous(): the loop returns before the products are computed",
            # two instants of the same run (not two runs' times): a fact of this run
            returned_s < 0.25 * finished_s,
            shown=f"{n} products queued in {returned_s * 1e3:.1f} ms; computed after {finished_s * 1e3:.0f} ms",
            otherwise=(f"queueing took {returned_s / max(finished_s, 1e-12):.0%} of the time, "
                       f"{returned_s / max(n, 1) * 1e3:.2f} ms per product where the frontend alone needs some "
                       f"0.05 ms: it shared the CPU with the worker ({_load(machine)}), or the products were too "
                       "small to hide it. Raise the size, or run where a core is spare.")),
        lesson.check(
            "queueing does not make the work faster: it takes about eager torch's time",
            similar(finished_s, eager_s, tolerance=0.5, names=("queued", "eager"))
            if finished_s > 0 and eager_s > 0 else False,
            shown=f"{finished_s * 1e3:.0f} ms queued vs {eager_s * 1e3:.0f} ms eager",
            otherwise=(f"the worker thread got less CPU than eager torch did ({_load(machine)}): other processes "
                       "or the frontend's own Python competed with it. Rerun when the machine is quiet."),
            unclear=(f"one run each, {finished_s / max(eager_s, 1e-12):.2f}x apart: more than the 1.5x band, less "
                     f"than twice beyond it ({_load(machine)}). Rerun when the machine is quiet")),
    ]


def narrow_waits(item_two_s: float, done_two_s: float, item_one_s: float, done_one_s: float,
                 machine: Any = None) -> list[lesson.Check]:
    """A long chain of unrelated products, then a tiny ``z``: ``item_*`` is when ``z.item()``
    returned, ``done_*`` when the barrier returned (from the chain's start), on two workers and
    on one."""
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    return [
        lesson.check(
            "with two workers, z.item() waits for z only, not for the unrelated products",
            item_two_s < 0.5 * done_two_s,  # two instants of the same run: a fact of this run
            shown=f"z.item() returned after {item_two_s * 1e3:.1f} ms; synchronize() after {done_two_s * 1e3:.0f} ms",
            otherwise=(f"the second worker did not get a CPU while the first multiplied ({_load(machine)}): "
                       "with one busy CPU a thread waits its turn. Run on a machine with a spare core.")),
        lesson.check(
            "with one worker (like one CUDA stream), z.item() waits for everything queued before z",
            item_one_s >= 0.8 * done_one_s,
            shown=f"z.item() returned after {item_one_s * 1e3:.0f} ms; synchronize() after {done_one_s * 1e3:.0f} ms",
            otherwise="ops ran out of program order on one worker: a bug to report on the project's issue tracker."),
    ]


def blockers_recorded(blocks: Iterable[tuple[str, str, float]], expected: Iterable[str],
                      product_s: float, machine: Any = None) -> list[lesson.Check]:
    """``blocks``: ``(reason, source, seconds)`` of the frontend's waits in the trace; ``expected``
    the reasons the cell's blockers should have caused, once per blocker (``float(t)`` and
    ``bool(t)`` are ``"item"`` too: all three read one number); ``product_s`` one product's
    eager time, shown for scale.  A wait is recorded only when the value was not ready yet."""
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    blocks = [b for b in blocks if b[0] != "waitall"]
    expected = list(expected)
    need, have = Counter(expected), Counter(r for r, _, _ in blocks)
    missing = [f"{r} ({have[r]} of {k})" for r, k in need.items() if have[r] < k]
    unnamed = [r for r, src, _ in blocks if not src]
    # every wait with its own line: float() and bool() are waits of reason "item" too, and one number per
    # reason would show float()'s wait under .item()'s name
    waits = ", ".join(f"{r} {fmt_time(s)}{_at(src)}" for r, src, s in blocks)
    return [
        lesson.check(  # a wait is recorded only when the value was not ready: recorded = waited
            "each blocker made the frontend wait for its product",
            not missing,
            shown=(waits or "no waits") + f" (one product: {fmt_time(product_s)} eagerly)",
            otherwise=(f"not recorded: {', '.join(missing)}: the product was done before the blocker ran "
                       f"({_load(machine)})"
                       + ("; with one usable CPU the worker computes while the frontend waits for the CPU, "
                          "not for the value" if machine is not None and machine.usable_cpus < 2 else "")
                       + ". Make the product larger, or run where a core is spare.")),
        lesson.check(
            "the trace names the line of each blocker",
            not unnamed and bool(blocks),
            shown=f"{len(blocks)} waits, each with its source line",
            otherwise=f"waits without a source line: {', '.join(unnamed) or 'none recorded'}"),
    ]


def largest_stall(trace: Any, loops: tuple[int, ...] = ()) -> tuple[float, float]:
    """``(seconds, share)``: the longest gap between two consecutive frontend pushes of a trace, and
    its share of the span of the loop it fell in (0, 0 without two pushes).  ``loops``: the push
    counts of the timed loops that end the trace, in order (e.g. ``(n, n)``); gaps between loops and
    before them (untimed set-up) are not counted.  One stall that is most of a loop is a pause of the
    whole process (Python's garbage collector, the OS), not a per-op cost."""
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
    stall when one stall decides the result."""
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    integer("n", n, minimum=1)
    import statistics

    runs = [tuple(v) if isinstance(v, (tuple, list)) else (v,) for v in (sync_s, async_s, eager_s)]
    sync_runs, async_runs, eager_runs = runs
    sync_s, async_s, eager_s = (statistics.median(r) for r in runs)
    us = lambda s: s / n * 1e6  # noqa: E731
    loops = (n,) * (len(sync_runs) + len(async_runs))  # the trace ends with the timed loops, in order
    stall, share = largest_stall(trace, loops)
    stall_words = (f"one stall of {stall * 1e3:.0f} ms between two pushes was {share:.0%} of its loop: a pause of "
                   "the whole process (e.g. Python's garbage collector), not the worker's share of the CPU; rerun"
                   if share >= 0.3 else "")
    speedup = sync_s / max(async_s, 1e-12)
    return [
        lesson.check(
            "asynchronous beats synchronous in plain torch too",
            # the ratio as the book prints it (synchronous / asynchronous, above 1 when asynchrony wins)
            compare(sync_runs, async_runs, less=False, names=("synchronous", "asynchronous"))
            if async_s > 0 and sync_s > 0 else False,
            shown=f"{us(sync_s):.1f} µs/op synchronous vs {us(async_s):.1f} µs/op asynchronous "
                  f"(synchronous / asynchronous = {speedup:.2f})",
            otherwise=stall_words or (f"the worker's share of the CPU was what limited both ({_load(machine)}): with "
                                      "one usable CPU the barrier after each op costs little more than the op. Rerun on "
                                      "a quiet machine."),
            unclear=stall_words or (f"{len(sync_runs)} and {len(async_runs)} run(s) ({_load(machine)}); one run each "
                                    "decides only beyond 2x, and on a shared CPU the barrier's wake-up and the worker's "
                                    "turns vary by that much. Rerun on a quiet machine")),
        lesson.check(
            "for a one-element op the frontend is the bottleneck: queueing costs more than eager torch's op",
            compare(async_runs, eager_runs, less=False, names=("queued", "eager"))
            if async_s > 0 and eager_s > 0 else False,
            shown=f"{us(async_s):.1f} µs/op queued vs {us(eager_s):.1f} µs/op eager "
                  f"(queued / eager = {async_s / max(eager_s, 1e-12):.2f})",
            otherwise="eager torch was slower than queueing here, unlike on every machine measured so far: "
                      f"{_load(machine)}; rerun when the machine is quiet.",
            unclear=f"{_load(machine)}: rerun when the machine is quiet, or with more runs"),
    ]
