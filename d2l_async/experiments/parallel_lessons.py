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

from d2l_async import lesson
from d2l_async.analysis import intersection_seconds, intervals_union, union_seconds
from d2l_async.verdict import compare, overruled
from d2l_async.trace import Trace
from d2l_async._args import TRACE_HINT, having, instance, sequence

__all__ = ["RunFacts", "run_facts", "DevicePlan", "plan_devices", "device_intervals", "busy_seconds", "overlap_seconds",
           "max_concurrency", "gap_after", "two_device_checks", "independence_checks", "mlp_checks",
           "frontend_wait_check", "SIDE_BY_SIDE", "SERIAL", "HIDDEN", "CONCURRENCY"]

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
    """Thread-devices where the machine has ``needed`` spare cores, modelled devices always."""
    if facts is not None:
        having("facts", facts, ("spare_cpus",), what="the machine's facts (run_facts()) or None")
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

    work = trace.where(kind=list(kinds) if kinds is not None else list(BACKEND_KINDS),
                       lane=[lane.name for lane in trace.backend_lanes])
    out = [(float(work["start"][i]), float(work["end"][i])) for i in range(len(work))
           if device is None or str(work["device"][i]) == device]
    return sorted(out)


def busy_seconds(iv: list[tuple[float, float]]) -> float:
    """Seconds covered by the intervals (each instant counted once)."""
    return union_seconds(np.array([a for a, _ in iv]), np.array([b for _, b in iv]))


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


_ONE_CPU = ("with {cpus:g} usable CPU two threads cannot run at the same moment: their ops' intervals overlap only "
            "because the OS switched between them, and a shorter run comes from this process getting a larger "
            "share of the CPU against the other work (two threads against one). The modelled devices show the "
            "schedule here; for threads, use a machine with two spare cores")


#: Thread-devices ran side by side: the process used at least this many CPUs at once (CPU time / wall).
CONCURRENCY = 1.5


def _threads_concurrency(r: Any, cpu: float, wall: float) -> float | None:
    """CPU time / wall time of a thread-device run (None for modelled devices, GPUs, or no number)."""
    if not getattr(r, "virtual", True) or getattr(r, "modelled", None) or not (cpu == cpu) or wall <= 0:
        return None
    return cpu / wall


def _cpu_clause(conc: float | None, cpu: float, wall: float) -> str:
    return "" if conc is None else f"; the process used {cpu * 1e3:.1f} ms of CPU in {wall * 1e3:.1f} ms: {conc:.2f} CPUs at once"


_SHARE = ("the process used only {conc:.2f} CPUs at once ({facts}): the threads took turns, and a shorter run came from "
          "a larger share of the CPU against the other work (two threads against one), not from running side by side. "
          "The modelled devices show the schedule here; for threads, use a machine with two spare cores")


def _why_slow(facts: RunFacts | None, modelled: Any, threads_hint: str) -> str:
    """The measured reason a parallel run did not overlap, and what to change."""
    where = facts.sentence() if facts is not None else "machine not sampled"
    if modelled:
        ops = sum(int(m.get("ops", 0)) for m in modelled.values())
        over = sum(int(m.get("overruns", 0)) for m in modelled.values())
        worst = max(float(m.get("worst_overrun", 0.0)) for m in modelled.values())
        if over:
            return (f"{over} of {ops} modelled ops took longer to compute on this CPU than their modelled time "
                    f"(worst {worst:.1f}×; {where}): the CPU, not the model, set the pace. Use a smaller size, or a "
                    "slower DeviceModel")
        return (f"no modelled op overran ({ops} ops; {where}); the frontend's pushes or the workers' wake-ups were "
                "delayed by other work on the CPU. Rerun when the machine is quieter")
    return f"{where}: {threads_hint}"


_GPU_WHY = ("on GPUs the two devices' work did not overlap: look on the timeline for a synchronizing call between "
            "them (a blocker, a copy to the host, torch.cuda.synchronize) and for kernels too small to outlast their "
            "launches; raise the size")

_THREADS_HINT = ("the virtual devices are threads, and with fewer spare cores than devices they take turns. "
                 "The modelled devices show the schedule on any machine; for threads, rerun with 2 spare cores")


# -- the checks ------------------------------------------------------------------------------------
def _speed_up_role(r: Any) -> str:
    """A speed-up of thread-devices or GPUs is evidence (``"speed-up"``, gated by the machine); one of
    modelled devices is what their model gives (``"modelled"``: its own mark, never ✔ evidence)."""
    return "modelled" if getattr(r, "modelled", None) else "speed-up"


#: what a speed-up check says when the runs' spread straddles the ideal
_SCATTER = "the runs' times scatter across the ideal: more repeats decide it"


def _speed_up(verdict: Any, gated: bool, overlapped: Any, never: str) -> Any:
    """A speed-up verdict as the machine and the trace allow it: can't tell where the machine could not
    run the two sides at once (the machine gates a speed-up); ✘ where the timings credit one
    that the trace contradicts (``overlapped()`` false: ``never`` says what it saw)."""
    if gated:
        return overruled(verdict, None, "machine gate")
    if verdict.holds is True and not overlapped():
        return overruled(verdict, False, f"trace: {never}")
    return verdict


def two_device_checks(r: Any) -> list[lesson.Check]:
    """Notebook 07's first claims, on a :class:`~d2l_async.experiments.TwoDeviceResult`."""
    having("r", r, ("devices",), what="a TwoDeviceResult")
    a, b = r.devices
    ov = overlap_seconds(r.trace_concurrent, a, b)
    gap = gap_after(r.trace_serialized, a, b)
    cpu = getattr(r, "concurrent_cpu_seconds", float("nan"))
    conc = _threads_concurrency(r, cpu, r.concurrent_seconds)
    # at least SIDE_BY_SIDE faster, beyond the spread of the runs; credited only where the machine could
    # run both devices at once (the machine gates a speed-up) and the trace shows them both busy
    # decided as printed: the speedup, barrier-between / concurrent, at least SIDE_BY_SIDE
    verdict = compare(getattr(r, "serialized_runs", ()) or r.serialized_seconds,
                      getattr(r, "concurrent_runs", ()) or r.concurrent_seconds, less=False, by=SIDE_BY_SIDE,
                      names=("barrier between", "concurrent"))
    gated = _one_cpu(r) or (conc is not None and conc < CONCURRENCY)
    side = _speed_up(verdict, gated, lambda: ov > 0, "never both busy")
    why = _why_slow(r.facts, r.modelled, _THREADS_HINT) if r.virtual else _GPU_WHY
    if conc is not None and conc < CONCURRENCY and r.speedup >= SIDE_BY_SIDE:
        why = _SHARE.format(conc=conc, facts=_facts(r))
    if _one_cpu(r):
        why = _ONE_CPU.format(cpus=r.facts.usable_cpus)
    what = "modelled devices" if r.modelled else ("GPUs" if not r.virtual else "thread-devices")
    iv = device_intervals(r.trace_concurrent)
    if r.modelled and iv:  # where the time went, measured: the devices' busy time against the run's span
        span = max(e for _, e in iv) - min(s for s, _ in iv)
        busy = max(busy_seconds(device_intervals(r.trace_concurrent, d)) for d in r.devices)
        why += f" (the busier device held its ops {busy * 1e3:.1f} ms of the {span * 1e3:.1f} ms its work spanned)"
    bound = "at most 2×"
    if round(r.speedup, 2) > 2.0:  # above the bound as printed: say, measured, why (ops took longer one by one)
        ser, con = _mean_op(r.trace_serialized), _mean_op(r.trace_concurrent)
        bound = (f"above the ideal 2× because an op took {ser * 1e3:.1f} ms on average with the barrier vs "
                 f"{con * 1e3:.1f} ms without")
    return [
        lesson.check(f"independent work on two devices runs side by side ({what})", side,
                     shown=(f"concurrent {r.concurrent_seconds * 1e3:.1f} ms vs barrier between "
                            f"{r.serialized_seconds * 1e3:.1f} ms: {r.speedup:.2f}× ({bound}); both busy at once "
                            f"for {ov * 1e3:.1f} ms" + _cpu_clause(conc, cpu, r.concurrent_seconds)),
                     otherwise=why, role=_speed_up_role(r),
                     unclear=why if gated else _SCATTER),
        lesson.check(f"a barrier between them serializes the two devices ({what})", gap >= -1e-6,
                     shown=(f"{b}'s first product began {gap * 1e3:.2f} ms after {a}'s last ended"
                            if gap == gap else "no ops recorded"),
                     otherwise=("the serialized run's ops overlapped: the barrier did not wait for the first "
                                "device (a bug: report it)")),
    ]


def independence_checks(rows: Sequence[Any]) -> list[lesson.Check]:
    """Notebook 02's claims on :func:`~d2l_async.experiments.run_independent_vs_dependent`'s rows
    (one per worker count; the first must be 1 worker, the last 2 or more)."""
    rows = sequence("rows", rows, what="run_independent_vs_dependent() rows", empty=False)
    for r in rows:
        having("rows", r, ("independent_seconds", "dependent_seconds"), what="a sequence of IndependenceResults")
    one, many = rows[0], rows[-1]
    what = "modelled devices" if getattr(one, "modelled", None) else "thread-workers"
    gain = one.independent_seconds / many.independent_seconds
    dep_gain = one.dependent_seconds / many.dependent_seconds
    conc = max_concurrency(many.trace_dependent)
    why = _why_slow(getattr(many, "facts", None), getattr(many, "modelled", None), _THREADS_HINT)
    cpu = getattr(many, "independent_cpu_seconds", float("nan"))
    at_once = _threads_concurrency(many, cpu, many.independent_seconds)
    if at_once is not None and at_once < CONCURRENCY and gain >= SIDE_BY_SIDE:
        why = _SHARE.format(conc=at_once, facts=_facts(many))
    if _one_cpu(many):
        why = _ONE_CPU.format(cpus=many.facts.usable_cpus)
    runs_one = getattr(one, "independent_runs", ()) or one.independent_seconds
    runs_many = getattr(many, "independent_runs", ()) or many.independent_seconds
    verdict = compare(runs_one, runs_many, less=False, by=SIDE_BY_SIDE,
                      names=("1 worker", f"{many.workers} workers"))  # the gain as printed: 1 worker / many
    gated = _one_cpu(many) or (at_once is not None and at_once < CONCURRENCY)
    side = _speed_up(verdict, gated, lambda: max_concurrency(many.trace_independent) >= 2, "never two ops at once")
    # a dependent chain: the trace says no two of its ops ran at once; its time is then the same on
    # more workers (a speed-up beyond SERIAL, beyond the spread, would contradict it)
    dep = compare(getattr(one, "dependent_runs", ()) or one.dependent_seconds,
                  getattr(many, "dependent_runs", ()) or many.dependent_seconds, less=False, by=SERIAL,
                  names=("1 worker", f"{many.workers} workers"))
    no_gain = replace(dep, holds=(conc == 1 and dep.holds is not True),
                      method=f"trace: at most one op at once; no speed-up beyond {SERIAL}x by {dep.method}")
    return [
        lesson.check(f"independent chains run side by side on {many.workers} workers ({what})",
                     side, role=_speed_up_role(many),
                     unclear=why if gated else _SCATTER,
                     shown=(f"{one.independent_seconds * 1e3:.1f} ms on 1 worker, {many.independent_seconds * 1e3:.1f} ms "
                            f"on {many.workers}: {gain:.2f}× faster" + (
                                f" (above the ideal {many.workers}×: an op took {_mean_op(one.trace_independent) * 1e3:.1f} "
                                f"ms on average on 1 worker vs {_mean_op(many.trace_independent) * 1e3:.1f} ms on "
                                f"{many.workers})" if round(gain, 2) > many.workers else "")
                            + _cpu_clause(at_once, cpu, many.independent_seconds)),
                     otherwise=why),
        lesson.check(f"a dependent chain cannot use a second worker ({what})",
                     no_gain, role="modelled" if getattr(many, "modelled", None) else "",
                     shown=(f"{one.dependent_seconds * 1e3:.1f} ms on 1 worker, {many.dependent_seconds * 1e3:.1f} ms on "
                            f"{many.workers} ({dep_gain:.2f}×); at most {conc} of its ops ran at once"),
                     otherwise=(f"its ops never ran two at once (the trace), so the {dep_gain:.2f}× is timing noise: "
                                f"the two runs were slowed differently by other work on the CPU "
                                f"({_facts(many)}); rerun, or use the modelled devices")
                     if conc == 1 else "two ops of one dependent chain ran at once: a bug, report it"),
    ]


def mlp_checks(r: Any) -> list[lesson.Check]:
    """Notebook 07's MLP claims on an :class:`~d2l_async.experiments.MLPResult`."""
    having("r", r, ("overlap",), what="an MLPResult")
    o = r.overlap
    copies = o.both + o.only_b
    hidden = o.both / copies if copies > 0 else 0.0
    devs = [d for d in r.roles if not str(r.roles[d]).startswith("host")]
    both = overlap_seconds(r.trace, devs[0], devs[1]) if len(devs) >= 2 else 0.0
    busy = busy_seconds(device_intervals(r.trace, devs[0])) if devs else 0.0
    what = "modelled devices" if r.modelled else ("GPUs" if not r.virtual else "thread-devices")
    why = _why_slow(r.facts, r.modelled, _THREADS_HINT) if r.virtual else _GPU_WHY
    cpu = getattr(r, "cpu_seconds", float("nan"))
    at_once = _threads_concurrency(r, cpu, getattr(r, "seconds", 0.0))
    side_why = why
    if at_once is not None and at_once < CONCURRENCY:
        why = side_why = (f"the process used only {at_once:.2f} CPUs at once ({_facts(r)}): the device threads took "
                          "turns on the CPU, so their intervals overlap only because the OS switched between them. The "
                          "modelled devices show the schedule here; for threads, use a machine with two spare cores")
    if _one_cpu(r):
        why = side_why = _ONE_CPU.format(cpus=r.facts.usable_cpus)
    return [
        lesson.check(f"the two devices computed their halves side by side ({what})",
                     busy > 0 and both >= 0.5 * busy and not _one_cpu(r) and (at_once is None or at_once >= CONCURRENCY),
                     role="modelled" if r.modelled else "",
                     shown=(f"both busy at once {both * 1e3:.1f} ms of {devs[0]}'s {busy * 1e3:.1f} ms busy"
                            + _cpu_clause(at_once, cpu, getattr(r, "seconds", 0.0))),
                     otherwise=side_why),
        lesson.check(f"communication overlaps computation ({what})",
                     hidden >= HIDDEN and not _one_cpu(r) and (at_once is None or at_once >= CONCURRENCY),
                     role="modelled" if r.modelled else "",
                     shown=(f"copies ran {copies * 1e3:.1f} ms, {o.both * 1e3:.1f} ms of it ({hidden:.0%}) while "
                            "compute ran"),
                     otherwise=why),
        lesson.check("the loss went down", len(r.losses) >= 2 and r.losses[-1] < r.losses[0],
                     shown=f"{r.losses[0]:.3f} → {r.losses[-1]:.3f} over {len(r.losses)} minibatches",
                     otherwise="too few minibatches or too large a learning rate: raise batches or lower lr"),
    ]


def frontend_wait_check(trace: Any, reason: str = "print") -> lesson.Check:
    """Notebook 02's first claim: the frontend pushed everything and then waited at ``reason``."""
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    blocks = trace.where(kind="block")
    waited = [float(blocks["end"][i] - blocks["start"][i]) for i in range(len(blocks))
              if str(blocks["reason"][i]) == reason]
    ops = trace.where(kind="op")
    last_push = trace.where(kind="launch")
    pushed = float(last_push["end"].max() - last_push["start"].min()) if len(last_push) else 0.0
    work = float(ops["end"].max() - ops["start"].min()) if len(ops) else 0.0
    return lesson.check(
        f"the frontend raced ahead and waited at {reason}(z)", bool(waited) and waited[0] > 0,
        shown=(f"pushed {len(last_push)} ops in {pushed * 1e3:.3f} ms, then waited {waited[0] * 1e3:.3f} ms at "
               f"{reason}(z) while the backend ran them ({work * 1e3:.2f} ms)" if waited else
               f"no wait at {reason}(z): the backend finished its {len(ops)} ops ({work * 1e3:.2f} ms) first"),
        otherwise=("the backend finished before the frontend reached the print: the ops were shorter than the "
                   "frontend's own statements in between. Raise n, or rerun"))
