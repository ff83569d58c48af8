"""Measured reasons for a lesson that did not hold: the CPUs this run had, in words.

A ✘ must say why from measured facts (:mod:`d2l_async.lesson`).  On a CPU engine the usual facts are
the usable CPUs (affinity and cgroup quota), the other work already on them, and how much CPU time
the frontend and the workers actually got.  These helpers turn a
:class:`d2l_async.devices.Machine` snapshot and :class:`~d2l_async.experiments._cpu.CpuTimes` into
short clauses, and are pure (the snapshot is taken when the experiment starts and kept in its result).
"""

from __future__ import annotations

from typing import Any

from d2l_async._words import fmt_time
from d2l_async._args import having

__all__ = ["cpus_clause", "few_cpus", "fmt_time", "machine_words", "overlap_clause"]  # fmt_time: d2l_async._words


def few_cpus(machine: Any, need: float = 2.0) -> bool:
    """True when fewer than ``need`` CPUs were usable, or fewer than ``need`` were spare of other work."""
    if machine is None:
        return False
    return float(machine.usable_cpus) < need or float(machine.spare_cpus) < need - 0.5


def machine_words(m: Any) -> str:
    """``"2 usable CPUs, 0.4 spare"`` -- the short form of :func:`cpus_clause`."""
    if m is not None:
        having("m", m, ("usable_cpus", "spare_cpus"), what="a d2l_async.devices.machine() snapshot or None")
    if m is None:
        return "the machine was not recorded"
    return (f"{m.usable_cpus:g} usable CPU{'s' if m.usable_cpus != 1 else ''}, "
            f"{m.spare_cpus:.1f} spare")


def cpus_clause(machine: Any) -> str:
    """``"1 usable CPU, 0.0 spare (other work on it)"`` — or ``"the machine was not recorded"``."""
    if machine is None:
        return "the machine was not recorded"
    usable, spare = float(machine.usable_cpus), float(machine.spare_cpus)
    plural = "" if usable == 1 else "s"
    return f"{usable:g} usable CPU{plural}, {spare:.1f} of them not busy with other work (load average {machine.load_avg:.1f})"


def overlap_clause(cpu: Any) -> str:
    """What the CPU clock measured: who used how much CPU in how much wall time."""
    return (f"the frontend used {fmt_time(cpu.frontend)} of CPU and the workers {fmt_time(cpu.backend)} "
            f"in {fmt_time(cpu.wall)} of wall time: concurrency {cpu.concurrency:.2f} "
            "(2 = side by side all along, 1 = one at a time)")


def cpu_cause(machine: Any, threads: str) -> tuple[Any, dict[str, str]]:
    """Why ``threads`` (e.g. ``"the frontend and the worker"``) did not run side by side, from the machine
    the run had: fewer spare CPUs than they need (``NO_SPARE_CPU``), or CPUs enough and Python's lock
    serializing them (``INTERPRETER_LOCK``); ``MISSING`` when the machine was not recorded.

    Returns:
        ``(cause, facts)``: a :class:`d2l_async.lesson.Cause` and the facts its words name.
    """
    from d2l_async.lesson import Cause

    if machine is None:
        return Cause.MISSING, {"missing": "the machine was not recorded, so no reason can be read from it"}
    facts = {"cpus": machine_words(machine), "threads": threads}
    return (Cause.NO_SPARE_CPU if few_cpus(machine, 2) else Cause.INTERPRETER_LOCK), facts


def example_machine(cpus: float = 2, spare: float = 2) -> Any:
    """A :class:`d2l_async.devices.Machine` with ``cpus`` usable CPUs, ``spare`` of them free: the machine of
    a claim's synthetic falsifier or counterfactual (:mod:`d2l_async.claims`).

    Returns:
        The frozen snapshot.
    """
    from d2l_async._machine import Machine

    n = max(1, int(round(cpus)))
    return Machine(float(cpus), n, None, n, float(cpus - spare), 8 << 30, None, (), float(cpus - spare))
