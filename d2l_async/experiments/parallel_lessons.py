"""What the device experiments must show, checked on this run: notebooks 02 and 07's lessons.

The book's claims (D2L §13.2-13.3) are about devices:

* independent work on two devices (or two workers) runs side by side: about half the time;
* a barrier between them serializes it: about the time of one device doing both;
* a dependent chain cannot use a second worker: every op waits for the one before;
* communication overlaps computation: a gradient's copy runs while the other layer's backward does.

Whether they held *here* is a fact of the run, read from its trace and timings by the pure
functions below (each returns :class:`d2l_async.lesson.Check` values, not displayed; the notebook
shows them).  When a claim does not hold, the check says why from measured facts -- usable and busy
CPUs, the load, ops that overran their modelled time -- and what to change.

:func:`plan_devices` decides what a notebook runs: the engine's virtual devices are threads, which
run side by side only with a spare core each; modelled-time devices (:mod:`d2l_async.engine._modelled`)
overlap on any machine.  With enough spare cores both are shown, side by side; without, the
modelled devices alone, and the plan's ``reason`` says why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from d2l_async import claims, lesson
from d2l_async._words import fmt_time
from d2l_async.analysis import intersection_seconds, intervals_union, union_seconds
from d2l_async.verdict import compare, overruled
from d2l_async.trace import Trace
from d2l_async._args import TRACE_HINT, having, instance, integer, sequence

__all__ = ["RunFacts", "run_facts", "DevicePlan", "plan_devices", "device_intervals", "busy_seconds", "overlap_seconds",
           "max_concurrency", "gap_after", "two_device_checks", "independence_checks", "mlp_checks",
           "frontend_wait_check", "SIDE_BY_SIDE", "SERIAL", "HIDDEN", "CONCURRENCY", "SIDE_BY_SIDE_02", "DEPENDENT",
           "TWO_DEVICES", "BARRIER", "COMM", "WAITED"]

#: "Side by side": at least this speedup (2 is the most two devices can give).
SIDE_BY_SIDE = 1.5
#: "Not parallelizable": a second worker speeds a dependent chain up by less than this.
SERIAL = 1.15
#: "Communication overlaps computation": at least this share of the copy time ran beside compute.
HIDDEN = 0.2


@dataclass(frozen=True)
class RunFacts:
    """The machine when an experiment ran: the reasons a lesson check can give.

    Attributes:
        usable_cpus: CPUs this process may use (affinity and cgroup quota).
        busy_cpus: of those, how many other work kept busy (None: unknown, see ``load``).
        load: the 1-minute load average.
        describe: :meth:`d2l_async.devices.Machine.describe`'s line.
    """

    usable_cpus: float
    busy_cpus: float | None
    load: float
    describe: str

    @property
    def spare_cpus(self) -> float:
        busy = self.busy_cpus if self.busy_cpus is not None else min(self.load, self.usable_cpus)
        return max(0.0, self.usable_cpus - busy)

    def sentence(self) -> str:
        busy = f"{self.busy_cpus:.1f} busy with other work" if self.busy_cpus is not None else \
            f"load average {self.load:.1f}"
        return f"{self.usable_cpus:g} usable CPU{'' if self.usable_cpus == 1 else 's'}, {busy}"


def run_facts() -> RunFacts:
    """Sample the machine now (about 0.05 s)."""
    from d2l_async.devices import machine

    m = machine(sample_s=0.05)
    return RunFacts(float(m.usable_cpus), m.busy_cpus, float(m.load_avg), m.describe())


@dataclass(frozen=True)
class DevicePlan:
    """What a notebook runs on this machine.

    Attributes:
        threads: run the thread-devices (the engine's virtual devices) too.
        reason: one sentence saying why, from the measured spare CPUs.
        spare_cpus: usable CPUs not busy with other work.
    """

    threads: bool
    reason: str
    spare_cpus: float


def plan_devices(facts: RunFacts | None = None, *, needed: int = 2) -> DevicePlan:
    """Thread-devices where the machine has ``needed`` spare cores, modelled devices always.

    Returns:
        The frozen :class:`DevicePlan`: whether to run the thread-devices too, the reason in one sentence from
        the measured spare CPUs, and the spare CPUs.
    """
    if facts is not None:
        having("facts", facts, ("spare_cpus",), what="the machine's facts (run_facts()) or None")
    needed = integer("needed", needed, minimum=1)
    facts = run_facts() if facts is None else facts
    spare = facts.spare_cpus
    if spare >= needed - 0.25:
        return DevicePlan(True, f"{facts.sentence()}: {spare:.1f} spare, enough for {needed} thread-devices to "
                                f"run side by side; the modelled devices are shown beside them", spare)
    return DevicePlan(False, f"{facts.sentence()}: {spare:.1f} spare, fewer than the {needed} that "
                             f"{needed} thread-devices need to run side by side, so they would only take turns; "
                             "shown: modelled devices, which overlap on any machine", spare)


# -- facts read from a trace ------------------------------------------------------------------------
def device_intervals(trace: Any, device: str | None = None, *, kinds: Sequence[str] | None = None
                     ) -> list[tuple[float, float]]:
    """(start, end) of the work on every backend lane (of ``device``), sorted by start.

    Device work is what :data:`~d2l_async.trace.BACKEND_KINDS` names, on backend lanes only: engine ops and
    copies, and on GPUs kernels, memsets and copies too, while the frontend's ``cpu_op`` slices (also kind
    ``op`` in a CUDA capture) are left out (counting only ops and copies saw no GPU kernel).
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    from d2l_async.trace import BACKEND_KINDS

    if kinds is not None:
        kinds = [instance("kinds", k, str, what="event kind (str)") for k in sequence("kinds", kinds, what="event kinds")]
    work = trace.where(kind=kinds if kinds is not None else list(BACKEND_KINDS),
                       lane=[lane.name for lane in trace.backend_lanes])
    out = [(float(work["start"][i]), float(work["end"][i])) for i in range(len(work))
           if device is None or str(work["device"][i]) == device]
    return sorted(out)


def busy_seconds(iv: list[tuple[float, float]]) -> float:
    """Seconds covered by the intervals (each instant counted once)."""
    iv = sequence("iv", iv, what="(start, end) pairs of seconds")
    try:
        ends = np.array(iv, dtype=float).reshape(len(iv), 2)
    except (TypeError, ValueError):
        raise TypeError(f"iv must hold (start, end) pairs of seconds, got {iv!r:.80}") from None
    return union_seconds(ends[:, 0], ends[:, 1])


def _union(iv: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    return intervals_union(np.array([a for a, _ in iv], dtype=float), np.array([b for _, b in iv], dtype=float))


def _mean_op(trace: Any) -> float:
    iv = device_intervals(trace)
    return sum(e - s for s, e in iv) / len(iv) if iv else float("nan")


def overlap_seconds(trace: Any, a: str, b: str) -> float:
    """Seconds during which devices ``a`` and ``b`` both ran an op."""
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    return intersection_seconds(_union(device_intervals(trace, a)), _union(device_intervals(trace, b)))


def max_concurrency(trace: Any) -> int:
    """Most backend ops running at the same moment."""
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    edges = sorted([(s, 1) for s, _ in device_intervals(trace)] + [(e, -1) for _, e in device_intervals(trace)],
                   key=lambda x: (x[0], x[1]))
    run = best = 0
    for _, d in edges:
        run += d
        best = max(best, run)
    return best


def gap_after(trace: Any, first: str, then: str) -> float:
    """Seconds from ``first``'s last op end to ``then``'s first op start (negative: they overlapped)."""
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    a, b = device_intervals(trace, first), device_intervals(trace, then)
    if not a or not b:
        return float("nan")
    return min(s for s, _ in b) - max(e for _, e in a)


def _facts(r: Any) -> str:
    facts = getattr(r, "facts", None)
    return facts.sentence() if facts is not None else "machine not sampled"


def _one_cpu(r: Any) -> bool:
    """Thread-devices of a run that had fewer than two usable CPUs: they cannot have run at once."""
    facts = getattr(r, "facts", None)
    return bool(getattr(r, "virtual", True) and not getattr(r, "modelled", None) and facts is not None
                and facts.usable_cpus < 2)


#: Thread-devices ran side by side: the process used at least this many CPUs at once (CPU time / wall).
CONCURRENCY = 1.5


def _threads_concurrency(r: Any, cpu: float, wall: float) -> float | None:
    """CPU time / wall time of a thread-device run (None for modelled devices, GPUs, or no number)."""
    if not getattr(r, "virtual", True) or getattr(r, "modelled", None) or not (cpu == cpu) or wall <= 0:
        return None
    return cpu / wall


def _speed_up_role(r: Any) -> str:
    """A speed-up of thread-devices or GPUs is evidence (``"speed-up"``, gated by the machine); one of
    modelled devices is what their model gives (``"modelled"``: its own mark, never ✔ evidence)."""
    return "modelled" if getattr(r, "modelled", None) else "speed-up"


def _what(r: Any) -> str:
    return "modelled devices" if getattr(r, "modelled", None) else (
        "GPUs" if not getattr(r, "virtual", True) else "thread-workers")


def _why_not_side_by_side(r: Any, trace: Any, conc: float | None, threads: str) -> tuple[Any, dict[str, Any]]:
    """Why two workers or devices did not run side by side, from the run itself: the engine (a naive one
    has no worker thread), the modelled ops that overran their modelled time (the CPU set the pace), the
    CPU time the process got against the wall time, the machine's CPUs."""
    from d2l_async.lesson import Cause

    if trace is not None and trace.meta.get("engine") == "naive":
        return Cause.NO_WORKER_THREAD, {}
    if not getattr(r, "virtual", True):
        return Cause.GPU, {"gpu": _GPU_WHY}
    facts = getattr(r, "facts", None)
    cpus = facts.sentence() if facts is not None else "the machine was not sampled"
    modelled = getattr(r, "modelled", None)
    if modelled:
        ops = sum(int(m.get("ops", 0)) for m in modelled.values())
        over = sum(int(m.get("overruns", 0)) for m in modelled.values())
        if over:
            return Cause.NO_SPARE_CPU, {"cpus": cpus, "threads": f"{over} of {ops} modelled ops' real computations"}
        return Cause.SPREAD, {"runs": "the modelled runs (the frontend's pushes were delayed)"}
    if _one_cpu(r) or (conc is not None and conc < CONCURRENCY) or (facts is not None and facts.spare_cpus < 1.75):
        return Cause.NO_SPARE_CPU, {"cpus": cpus, "threads": threads}
    return Cause.INTERPRETER_LOCK, {"cpus": cpus, "threads": threads}


_GPU_WHY = ("on GPUs the two devices' work did not overlap: look on the timeline for a synchronizing call between "
            "them, or kernels too short to outlast their launches")


def _speed_up(verdict: Any, gated: bool, overlapped: Any) -> Any:
    """A speed-up verdict as the machine and the trace allow it: can't tell where the machine could not
    run the two sides at once (the machine gates a speed-up); ✘ where the timings credit one that the
    trace contradicts (``overlapped()`` false)."""
    if gated:
        return overruled(verdict, None, "machine gate")
    if verdict.holds is True and not overlapped():
        return overruled(verdict, False, "trace: never both busy")
    return verdict


SIDE_BY_SIDE_02 = claims.claim(
    "02.independent-side-by-side", notebooks=("02_dependency_graph",),
    sentence="independent chains run side by side on {workers} workers ({what})",
    book="§13.2.1: the backend runs whatever the dependency graph allows at the same time",
    quantity="1 worker / N workers, wall time of the independent chains, every run",
    rule=f"compare: the interval wholly above {SIDE_BY_SIDE}; credited only where the machine and the trace allow")
DEPENDENT = claims.claim(
    "02.dependent-no-gain", notebooks=("02_dependency_graph",),
    sentence="a dependent chain cannot use a second worker ({what})",
    book="§13.2.1: an op that reads another's result waits for it",
    quantity="the most of its ops running at once (the trace), and 1 worker / N workers of its wall time",
    rule=f"fact: at most one op at once, and compare: the interval wholly below {SERIAL}")
TWO_DEVICES = claims.claim(
    "07.side-by-side", notebooks=("07_automatic_parallelism",),
    sentence="independent work on two devices runs side by side ({what})",
    book="§13.3: the backend runs independent work on two devices at the same time",
    quantity="barrier between / concurrent, wall time, every run",
    rule=f"compare: the interval wholly above {SIDE_BY_SIDE}; credited only where the machine and the trace allow")
BARRIER = claims.claim(
    "07.barrier-serializes", notebooks=("07_automatic_parallelism",),
    sentence="a barrier between them serializes the two devices ({what})",
    book="§13.3: a barrier keeps the frontend from issuing the second device's work",
    quantity="when the second device's first op began after the first device's last op ended (the trace)",
    rule="fact: the gap is not negative", says="{second}'s first op began {gap} after {first}'s last ended")
COMM = claims.claim(
    "07.comm-overlaps", notebooks=("07_automatic_parallelism",),
    sentence="communication overlaps computation ({what})",
    book="§13.3: copying one layer's gradient while the other layer's backward runs",
    quantity="the share of the copies' time during which compute ran too (the trace)",
    rule=f"fact: at least {HIDDEN:.0%}", says="{share} of the copies' {copies} ran beside compute")
WAITED = claims.claim(
    "02.waited-at-print", notebooks=("02_dependency_graph",),
    sentence="the frontend raced ahead and waited at {reason}(z)",
    book="§13.2.1: only print(z) needs a value, so only there does the frontend wait",
    quantity="the frontend's wait at the blocker (the trace)",
    rule="fact: a wait longer than zero", says="waited {waited} at {reason}(z); the backend's ops took {work}")


def two_device_checks(r: Any) -> list[lesson.Check]:
    """Notebook 07's claims on a :class:`~d2l_async.experiments.TwoDeviceResult`.

    Returns:
        The checks of :data:`TWO_DEVICES` and :data:`BARRIER`.
    """
    having("r", r, ("devices",), what="a TwoDeviceResult")
    a, b = r.devices
    ov = overlap_seconds(r.trace_concurrent, a, b)
    gap = gap_after(r.trace_serialized, a, b)
    cpu = getattr(r, "concurrent_cpu_seconds", float("nan"))
    conc = _threads_concurrency(r, cpu, r.concurrent_seconds)
    verdict = compare(getattr(r, "serialized_runs", ()) or r.serialized_seconds,
                      getattr(r, "concurrent_runs", ()) or r.concurrent_seconds, less=False, by=SIDE_BY_SIDE,
                      names=("barrier between", "concurrent"))
    gated = _one_cpu(r) or (conc is not None and conc < CONCURRENCY)
    side = _speed_up(verdict, gated, lambda: ov > 0)
    cause, facts = _why_not_side_by_side(r, r.trace_concurrent, conc, "the two device threads")
    if side.holds is None and not gated and cause is not lesson.Cause.NO_WORKER_THREAD:
        cause, facts = lesson.Cause.SPREAD, {"runs": f"{verdict.n_a} vs {verdict.n_b} runs"}
    what = _what(r).replace("thread-workers", "thread-devices")
    return [
        TWO_DEVICES.check(side, cause=cause, facts={**facts, "what": what}, role=_speed_up_role(r)),
        BARRIER.check(gap >= -1e-6, cause=lesson.Cause.BUG,
                      facts={"what": what, "first": a, "second": b, "gap": fmt_time(gap),
                             "bug": "the serialized run's ops overlapped: the barrier did not wait"}),
    ]


def independence_checks(rows: Sequence[Any]) -> list[lesson.Check]:
    """Notebook 02's claims on :func:`~d2l_async.experiments.run_independent_vs_dependent`'s rows
    (one per worker count; the first must be 1 worker, the last 2 or more).

    Returns:
        The checks of :data:`SIDE_BY_SIDE_02` and :data:`DEPENDENT`.
    """
    rows = sequence("rows", rows, what="run_independent_vs_dependent() rows", empty=False)
    for r in rows:
        having("rows", r, ("independent_seconds", "dependent_seconds"), what="a sequence of IndependenceResults")
    one, many = rows[0], rows[-1]
    what = _what(one)
    conc = max_concurrency(many.trace_dependent)
    cpu = getattr(many, "independent_cpu_seconds", float("nan"))
    at_once = _threads_concurrency(many, cpu, many.independent_seconds)
    runs_one = getattr(one, "independent_runs", ()) or one.independent_seconds
    runs_many = getattr(many, "independent_runs", ()) or many.independent_seconds
    verdict = compare(runs_one, runs_many, less=False, by=SIDE_BY_SIDE,
                      names=("1 worker", f"{many.workers} workers"))  # the gain as printed: 1 worker / many
    gated = _one_cpu(many) or (at_once is not None and at_once < CONCURRENCY)
    side = _speed_up(verdict, gated, lambda: max_concurrency(many.trace_independent) >= 2)
    if getattr(many, "chains", 2) < 2:  # one chain: the "independent" run has no independent work
        cause, facts = lesson.Cause.ONE_CHAIN, {"chains": many.chains}
    else:
        cause, facts = _why_not_side_by_side(many, many.trace_independent, at_once, "the worker threads")
        if side.holds is None and not gated and cause is not lesson.Cause.NO_WORKER_THREAD:
            cause, facts = lesson.Cause.SPREAD, {"runs": f"{verdict.n_a} vs {verdict.n_b} runs"}
    # a dependent chain: the trace says no two of its ops ran at once; then its time on more workers must
    # not fall beyond SERIAL (one worker / N workers wholly below it, against the spread of the runs)
    dep = compare(getattr(one, "dependent_runs", ()) or one.dependent_seconds,
                  getattr(many, "dependent_runs", ()) or many.dependent_seconds, less=True, by=SERIAL,
                  names=("1 worker", f"{many.workers} workers"))
    if conc > 1:
        no_gain = overruled(dep, False, "trace: two of its ops ran at once")
        dep_cause, dep_facts = lesson.Cause.BUG, {"bug": f"{conc} ops of one dependent chain ran at once"}
    elif dep.holds is False:  # faster on more workers beyond the spread, though one op ran at a time
        no_gain = overruled(dep, None, "trace: one op at a time, so the gain is the load's")
        dep_cause, dep_facts = lesson.Cause.TRACE, {
            "seen": f"one op at a time: the {dep.ratio:.2f} came from the machine's load, not a second worker"}
    else:
        no_gain = dep
        dep_cause, dep_facts = lesson.Cause.SPREAD, {"runs": f"{dep.n_a} vs {dep.n_b} runs"}
    return [
        SIDE_BY_SIDE_02.check(side, cause=cause, facts={**facts, "workers": many.workers, "what": what},
                              role=_speed_up_role(many)),
        DEPENDENT.check(no_gain, cause=dep_cause, facts={**dep_facts, "what": what},
                        role="modelled" if getattr(many, "modelled", None) else "",
                        detail=f"at most {conc} of its ops ran at once"),
    ]


def mlp_checks(r: Any) -> list[lesson.Check]:
    """Notebook 07's MLP claim on an :class:`~d2l_async.experiments.MLPResult`.

    Returns:
        The check of :data:`COMM`.
    """
    having("r", r, ("overlap",), what="an MLPResult")
    o = r.overlap
    copies = o.both + o.only_b
    hidden = o.both / copies if copies > 0 else 0.0
    cpu = getattr(r, "cpu_seconds", float("nan"))
    at_once = _threads_concurrency(r, cpu, getattr(r, "seconds", 0.0))
    ok = hidden >= HIDDEN and not _one_cpu(r) and (at_once is None or at_once >= CONCURRENCY)
    if hidden >= HIDDEN:
        cause, facts = _why_not_side_by_side(r, r.trace, at_once, "the device threads")
    else:
        per_batch = copies / max(getattr(r, "batches", 1), 1)
        cause, facts = lesson.Cause.TOO_SMALL, {"small": "each copy", "took": fmt_time(per_batch),
                                                "beside": "the compute it could hide behind"}
    return [COMM.check(ok, cause=cause, facts={**facts, "what": _what(r).replace("thread-workers", "thread-devices"),
                                               "share": f"{hidden:.0%}", "copies": fmt_time(copies)},
                       role="modelled" if getattr(r, "modelled", None) else "")]


def frontend_wait_check(trace: Any, reason: str = "print", machine: Any = None) -> lesson.Check:
    """Notebook 02's first claim: the frontend pushed everything and then waited at ``reason``.

    Returns:
        The check of :data:`WAITED`.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    if machine is not None:
        having("machine", machine, ("usable_cpus", "spare_cpus"), what="a d2l_async.devices.machine() snapshot or None")
    blocks = trace.where(kind="block")
    waited = [float(blocks["end"][i] - blocks["start"][i]) for i in range(len(blocks))
              if str(blocks["reason"][i]) == reason]
    ops = trace.where(kind="op")
    work = float(ops["end"].max() - ops["start"].min()) if len(ops) else 0.0
    if trace.meta.get("engine") == "naive":
        cause, facts = lesson.Cause.NO_WORKER_THREAD, {}
    elif machine is not None and float(machine.spare_cpus) < 1:
        from ._why import cpu_cause

        cause, facts = cpu_cause(machine, "the frontend and the worker")
    else:
        cause, facts = lesson.Cause.TOO_SMALL, {"small": f"the backend's {len(ops)} ops", "took": fmt_time(work),
                                                "beside": "the frontend's statements before the print"}
    return WAITED.check(bool(waited) and waited[0] > 0, cause=cause,
                        facts={**facts, "reason": reason, "waited": fmt_time(waited[0] if waited else 0.0),
                               "work": fmt_time(work)},
                        numbers={"waited_s": waited[0] if waited else 0.0, "work_s": work})


# ---------------------------------------------------------------- what makes each claim false
def _lanes_trace(intervals: Sequence[tuple[str, float, float]], *, engine: str = "threaded") -> Trace:
    """A trace of ops ``(device, start, end)`` on one worker lane per device, and the frontend."""
    from d2l_async.trace import Event, Lane, LaneRole

    devices = sorted({d for d, _, _ in intervals})
    lanes = [Lane("frontend", LaneRole.FRONTEND)] + [Lane(f"{d} worker {i}", LaneRole.BACKEND, d, True, 0)
                                                     for i, d in enumerate(devices)]
    events = [Event("frontend", "launch", "push", s - 2e-6, s - 1e-6) for _, s, _ in intervals]
    events += [Event(f"{d} worker {devices.index(d)}", "op", "matmul", s, e, issue=0.0, device=d)
               for d, s, e in intervals]
    return Trace.from_events(events, lanes).with_meta(engine=engine)


def _waited_trace(wait: float, *, engine: str = "threaded") -> Trace:
    """The z = x * y + 2 run: two ops of 10 ms each, and a ``print`` wait of ``wait`` seconds."""
    from d2l_async.trace import Event

    t = _lanes_trace([("cpu:0", 0.0, 0.01), ("cpu:0", 0.01, 0.02)], engine=engine)
    if wait <= 0:
        return t
    return Trace.from_events([*t.events(), Event("frontend", "block", "print", 0.001, 0.001 + wait, reason="print")],
                             t.lanes).with_meta(**t.meta)


def _register() -> None:
    from d2l_async.lesson import Cause

    from ._why import example_machine

    claims.falsifier(WAITED, "the backend done before the print: no wait",
                     lambda: frontend_wait_check(_waited_trace(0.0), machine=example_machine(4, 4)))
    claims.counterfactual(WAITED, "a naive engine (no worker thread)", Cause.NO_WORKER_THREAD,
                          lambda: frontend_wait_check(_waited_trace(0.0, engine="naive")))
    claims.counterfactual(WAITED, "one usable CPU, busy", Cause.NO_SPARE_CPU,
                          lambda: frontend_wait_check(_waited_trace(0.0), machine=example_machine(1, 0)))
    claims.counterfactual(WAITED, "four spare CPUs", Cause.TOO_SMALL,
                          lambda: frontend_wait_check(_waited_trace(0.0), machine=example_machine(4, 4)))


_register()
