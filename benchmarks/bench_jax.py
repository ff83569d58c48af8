"""The same four lessons on the engine and in JAX, side by side: their numbers and their checks' outcomes.

Each run times notebook 01, 03, 04 and 05's experiments on the CPU engine and in JAX
(:mod:`d2l_async.experiments.in_jax`) one after the other, lesson by lesson, and keeps every number the
checks read and each check's outcome (✔ True, ✘ False, ? None) -- the same check functions decide both.
05 runs the book's one-element ``y = x + 1`` (which XLA runs inline) and the same with ``jax.jit``, and
with 1000 elements per op (the smallest op XLA queues) on both.  The load average is read before and
after each lesson.

Writes ``benchmarks/results/jax.json``.  Needs JAX (``pip install "d2l-async[jax]"``).

Run: ``.venv/bin/python benchmarks/bench_jax.py [--runs 3] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
OUT = ROOT / "benchmarks" / "results" / "jax.json"


def checks(cs: list[Any]) -> list[dict[str, Any]]:
    return [{"name": c.name, "holds": c.holds, "shown": c.shown} for c in cs]


def lesson_01(backend: str) -> dict[str, Any]:
    from d2l_async import experiments as ex
    from d2l_async.experiments import asynchrony

    r = ex.run_asynchrony(backend="engine") if backend == "engine" else ex.run_asynchrony_jax()
    a = asynchrony.issue_and_finish(r.trace)
    return {"numbers": {"numpy_s": r.numpy.median, "naive_s": r.naive.median, "synced_s": r.synced.median,
                        "hidden_fraction": r.hidden_fraction, "last_push_share": a.issued / a.finished,
                        "size": r.size, "matmuls": r.matmuls},
            "checks": checks(asynchrony.checks(r)), "device": r.device}


def lesson_03(backend: str) -> dict[str, Any]:
    from d2l_async import experiments as ex
    from d2l_async.experiments import barriers

    r = ex.run_barriers(backend="engine") if backend == "engine" else ex.run_barriers_jax()
    return {"numbers": {"waitall_next_s": r.waitall_next, "wait_to_read_next_s": r.wait_to_read_next,
                        "waitall_wait_s": r.waitall_wait, "wait_to_read_wait_s": r.wait_to_read_wait,
                        "waitall_total_s": r.waitall_total, "wait_to_read_total_s": r.wait_to_read_total,
                        "long_ops": r.long_ops, "size": r.size},
            "checks": checks(barriers.checks(r)), "device": r.device}


def lesson_04(backend: str) -> dict[str, Any]:
    from d2l_async import experiments as ex
    from d2l_async.experiments import blockers

    r = ex.run_blockers(backend="engine") if backend == "engine" else ex.run_blockers_jax()
    cs = blockers.checks(r) + [blockers.report_check(r.trace, expected=5, size=r.size, machine=r.machine)]
    return {"numbers": {"cost_s": {k: r.cost(k) for k in r.per_call}, "baseline_s": r.baseline.median,
                        "book_style_s": {k: m.median for k, m in r.book_style.items()},
                        "every_step_s": r.every_step.median, "once_at_end_s": r.once_at_end.median,
                        "report": [[b.reason, b.source, b.seconds] for b in r.report], "size": r.size,
                        "steps": r.steps},
            "checks": checks(cs), "device": r.device}


def lesson_05(backend: str, numel: int = 1, jit: bool = False) -> dict[str, Any]:
    from d2l_async import experiments as ex

    r = (ex.run_sync_async(backend="engine", numel=numel) if backend == "engine"
         else ex.run_sync_async_jax(numel=numel, jit=jit))
    m = r.model
    return {"numbers": {"ops": r.ops, "numel": numel, "sync_us_per_op": r.per_op_sync * 1e6,
                        "async_us_per_op": r.per_op_async * 1e6, "ratio": r.ratio, "t1_us": m.t1 * 1e6,
                        "t2_us": m.t2 * 1e6, "t3_us": m.t3 * 1e6, "t2_source": m.t2_source,
                        "inline_executions": r.trace_async.meta.get("inline_executions"),
                        "traced_ops": len(r.trace_async.where(kind="op", lane=[l.name for l in
                                                                               r.trace_async.backend_lanes]))},
            "checks": checks(r.lessons() + [r.queue_lesson()]), "device": r.device}


#: per lesson, the numbers summarised (medians over the runs, in the unit their name says)
SUMMARY = {
    "01": {"naive_ms": ("naive_s", 1e3), "synced_ms": ("synced_s", 1e3), "numpy_ms": ("numpy_s", 1e3)},
    "03": {"wait_to_read_next_ms": ("wait_to_read_next_s", 1e3), "waitall_next_ms": ("waitall_next_s", 1e3)},
    "04": {"every_step_ms": ("every_step_s", 1e3), "once_at_end_ms": ("once_at_end_s", 1e3)},
    "05": {"sync_us_per_op": ("sync_us_per_op", 1), "async_us_per_op": ("async_us_per_op", 1), "ratio": ("ratio", 1),
           "inline_executions": ("inline_executions", 1)},
}


def summary(lessons: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians over the runs of each lesson's main numbers, and each side's outcomes (``"✔✔ ✔? ✔✔"``)."""
    import statistics

    out: dict[str, Any] = {}
    for key, rows in lessons.items():
        fields = SUMMARY[key.split()[0]]
        out[key] = {}
        for backend in ("engine", "jax"):
            got = [r[backend] for r in rows if backend in r]
            if not got:
                continue
            side = {name: statistics.median(g["numbers"][src] * f for g in got)
                    for name, (src, f) in fields.items() if all(g["numbers"].get(src) is not None for g in got)}
            if key == "04":
                side.update({f"{k}_book_ms": statistics.median(g["numbers"]["book_style_s"][k] * 1e3 for g in got)
                             for k in ("item", "asnumpy")})
            side["outcomes"] = " ".join("".join({True: "✔", False: "✘", None: "?"}[c["holds"]] for c in g["checks"])
                                        for g in got)
            out[key][backend] = side
    return out


LESSONS = {
    "01": lambda b: lesson_01(b),
    "03": lambda b: lesson_03(b),
    "04": lambda b: lesson_04(b),
    "05 one element": lambda b: lesson_05(b),
    "05 one element, jax.jit": lambda b: lesson_05(b, jit=True) if b == "jax" else None,
    "05 1000 elements": lambda b: lesson_05(b, numel=1000),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="quick-mode workloads (D2L_ASYNC_QUICK=1)")
    args = p.parse_args()
    os.environ["D2L_ASYNC_QUICK"] = "1" if args.quick else "0"
    from _provenance import command

    from d2l_async.capture import jax_cpu_devices

    jax_cpu_devices(2)  # before JAX's first operation: the barriers run needs two CPU devices
    import jax
    import torch

    from d2l_async.devices import machine

    out: dict[str, Any] = {
        "what": "Notebooks 01, 03, 04 and 05 on the CPU engine and in JAX, the same checks deciding both.",
        "command": command(), "date": time.strftime("%Y-%m-%d %H:%M"), "quick": args.quick,
        "load_avg_before": os.getloadavg()[0],
        "jax": jax.__version__, "torch": torch.__version__, "python": platform.python_version(),
        "machine": machine(sample_s=0.5).describe(), "lessons": {},
    }
    for key, run in LESSONS.items():
        rows = []
        for i in range(args.runs):
            row: dict[str, Any] = {"load_before": os.getloadavg()[0]}
            for backend in ("engine", "jax"):
                got = run(backend)
                if got is not None:
                    row[backend] = got
            row["load_after"] = os.getloadavg()[0]
            rows.append(row)
            marks = {b: "".join({True: "✔", False: "✘", None: "?"}[c["holds"]] for c in row[b]["checks"])
                     for b in ("engine", "jax") if b in row}
            print(f"{key} run {i + 1}: {marks} load {row['load_before']:.1f}-{row['load_after']:.1f}", flush=True)
        out["lessons"][key] = rows
    out["load_avg_after"] = os.getloadavg()[0]
    lessons = out.pop("lessons")
    out["summary"], out["lessons"] = summary(lessons), lessons  # the summary first: the numbers page lists it
    OUT.write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
