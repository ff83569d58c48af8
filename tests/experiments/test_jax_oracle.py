"""The oracle: notebooks 01, 03, 04 and 05 on the engine and in JAX come out the same.

JAX's CPU backend is a production runtime that dispatches asynchronously.  If the engine teaches what
such a runtime does, each lesson's claims, decided by the same check functions on both, must end the
same: ✔ on both or ✘ on both.  Claims are matched by name (the barriers' names and the blocker count
put aside); a claim only one side states (05's queue claim names the slower side) is not compared.

Timing claims on a shared machine: a claim either side cannot tell (?) decides nothing, and an attempt
agrees when no claim both sides decided differs and at least one agrees.  Each lesson gets up to
:data:`ATTEMPTS` attempts, the machine's spare CPUs read before each.  A disagreement fails the test only
if it came on a quiet machine (:data:`QUIET_SPARE_CPUS` spare) and no attempt agreed; on a loaded machine
it is skipped with the disagreement and the load in the reason (``make test``'s tier runs it; the
numbers side by side are ``benchmarks/bench_jax.py``'s).

05 compares 1000 elements per op on both: the book's one element is under XLA's 1000 flops, which XLA
runs inline (synchronously), so JAX's "asynchronous" loop is not asynchronous there (test_in_jax.py
checks that; ``benchmarks/results/jax.json`` has its numbers).
"""

from __future__ import annotations

import re
from typing import Any, Callable

import pytest

from d2l_async.devices import machine
from d2l_async.experiments import asynchrony, barriers, blockers

from d2l_async.capture import have_jax

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200),
              pytest.mark.skipif(not have_jax(), reason="JAX is not installed: pip install 'd2l-async[jax]'")]

#: attempts per lesson before it is judged
ATTEMPTS = 3
#: spare CPUs (not busy with other work) for a run to count as on a quiet machine
QUIET_SPARE_CPUS = 1.0


@pytest.fixture(scope="module", autouse=True)
def two_cpu_devices():
    """Asked before JAX's first operation in this process (see test_in_jax.py)."""
    from d2l_async.capture import jax_cpu_devices

    return jax_cpu_devices(2)


def _named(checks: list[Any], narrow: str = "") -> dict[str, Any]:
    """Checks by claim: the narrow barrier's name and the blocker count put aside."""
    out = {}
    for c in checks:
        name = c.name.replace(narrow, "<narrow wait>") if narrow else c.name
        out[re.sub(r"each of the \d+ blockers", "each of the blockers", name)] = c
    return out


def lesson_01(backend: str) -> dict[str, Any]:
    from d2l_async.experiments import run_asynchrony, run_asynchrony_jax

    r = run_asynchrony(backend="engine") if backend == "engine" else run_asynchrony_jax()
    return _named(asynchrony.checks(r))


def lesson_03(backend: str) -> dict[str, Any]:
    from d2l_async.experiments import run_barriers, run_barriers_jax

    r = run_barriers(backend="engine") if backend == "engine" else run_barriers_jax()
    return _named(barriers.checks(r), narrow=r.barrier_names[1])


def lesson_04(backend: str) -> dict[str, Any]:
    from d2l_async.experiments import BLOCKERS, run_blockers, run_blockers_jax
    from d2l_async.experiments.in_jax import JAX_BLOCKERS

    r = run_blockers(backend="engine") if backend == "engine" else run_blockers_jax()
    demo = len(BLOCKERS) if backend == "engine" else len(JAX_BLOCKERS)  # the blocker demo's lines
    return _named(blockers.checks(r) + [blockers.report_check(r.trace, expected=demo, size=r.size,
                                                               machine=r.machine)])


def lesson_05(backend: str) -> dict[str, Any]:
    from d2l_async.experiments import run_sync_async, run_sync_async_jax

    kw = dict(ops=2000, numel=1000, repeat=3, trace_ops=1000)
    r = run_sync_async(backend="engine", **kw) if backend == "engine" else run_sync_async_jax(**kw)
    return _named(r.lessons() + [r.queue_lesson()])


def compare(engine: dict[str, Any], jax: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``(agreeing claims, differing claims)`` among those both sides decided."""
    agree, differ = [], []
    for claim in engine.keys() & jax.keys():
        a, b = engine[claim].holds, jax[claim].holds
        if a is None or b is None:
            continue
        (agree if a == b else differ).append(claim)
    return sorted(agree), sorted(differ)


def _words(engine: dict[str, Any], jax: dict[str, Any], claims: list[str]) -> str:
    return "; ".join(f"{c}: engine {engine[c].text!r} vs JAX {jax[c].text!r}" for c in claims)


@pytest.mark.parametrize("lesson", [lesson_01, lesson_03, lesson_04, lesson_05], ids=["01", "03", "04", "05"])
def test_the_engine_and_jax_reach_the_same_outcome(lesson: Callable[[str], dict[str, Any]]):
    tried = []
    for attempt in range(ATTEMPTS):
        m = machine(sample_s=0.5)
        engine, jax = lesson("engine"), lesson("jax")
        agree, differ = compare(engine, jax)
        shared = engine.keys() & jax.keys()
        assert shared, f"no claim in common: engine {sorted(engine)}, JAX {sorted(jax)}"
        if agree and not differ:
            return
        tried.append((m, agree, differ, _words(engine, jax, differ)))
    quiet = [t for t in tried if t[0].spare_cpus >= QUIET_SPARE_CPUS and t[2]]
    if quiet:
        m, _, differ, words = quiet[-1]
        pytest.fail(f"on a quiet machine ({m.describe()}) the engine and JAX disagree on {differ}: {words}")
    load = ", ".join(f"{t[0].spare_cpus:.1f} spare CPUs (load {t[0].load_avg:.1f})" for t in tried)
    differed = [t[3] for t in tried if t[2]]
    pytest.skip(f"no attempt of {ATTEMPTS} decided the same claim on both sides on a quiet machine ({load}); "
                + (f"disagreements under load: {differed[-1]}" if differed else "every shared claim was can't tell"))
