"""How often each notebook's claims end ✔, ✘ or ? in default mode, run after run.

A notebook whose markdown states a claim should show it hold on an ordinary machine, most of the
time; where it cannot, the markdown should stop stating it.  This script runs the experiments behind
the claims exactly as the notebooks call them (default mode: no ``D2L_ASYNC_QUICK``; the same
functions, arguments and lesson checks, in a plain Python process rather than a kernel) ``--runs``
times, one group after another, and counts each check's outcome: ✔ holds, ✘ fails (with its
measured reason), ? can't tell, ◇ a modelled illustration (never counted as evidence).

Two conditions matter (see ``README``):

* the machine as it is (``python benchmarks/bench_claims.py``): the target is a ✔ in at least 4 of
  5 runs for every headline claim on a 2-core machine at load <= 4;
* one CPU shared with a busy process (``--pin 0``; the rank processes, engine threads and the busy
  neighbour all inherit the affinity): no claim may contradict its numbers, whatever its outcome.

The load average is read before and after each run of each group and stored with the counts.
Writes ``benchmarks/results/claims.json``: one entry per condition (a rerun replaces that
condition's entry and keeps the others; a rerun with ``--only`` replaces only those groups' rows, each
marked with its own load and date under ``measured``), each with every check's counts and texts.

Run: ``.venv/bin/python benchmarks/bench_claims.py [--runs 5] [--pin CPU] [--only 06 --only 10]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["D2L_ASYNC_QUICK"] = "0"  # default mode, as a reader runs the notebooks

OUT = ROOT / "benchmarks" / "results" / "claims.json"


@dataclass(frozen=True)
class Group:
    """One notebook cell's experiment and the checks it shows.

    Attributes:
        key: ``"<notebook> <what>"``, e.g. ``"06 sync every k"``.
        run: runs the experiment as the notebook does and returns its checks.
        headline: indexes of the checks that state the book's headline claims (the others are shown
            beside them: facts of the trace, the machine check).
    """

    key: str
    run: Callable[[], list[Any]]
    headline: tuple[int, ...] = ()


def _groups() -> list[Group]:
    from d2l_async import experiments as ex
    from d2l_async.experiments import collective, ddp, modelled_link
    from d2l_async.experiments import parallel_lessons as pl
    from d2l_async.experiments.queue_memory import queue_checks, time_check

    def queue() -> list[Any]:
        ex.run_queue_memory(batches=2)  # the notebook's warm-up
        runs = ex.compare_sync_every(ks=(None, 1, 4, 16))
        synced = runs[1]
        work = ex.compare_sync_every(ks=(None, 1), frontend_work_s=synced.backend_busy_seconds / synced.batches)
        return [*queue_checks(runs), time_check(work)]

    def scheduling() -> list[Any]:
        ex.run_scheduling(workers=(1,), ops=100)  # the notebook's warm-up
        return ex.run_scheduling(workers=(1, 2, 4, 8, 16)).lessons()

    def devices_02() -> list[Any]:
        plan = pl.plan_devices()
        rows = ex.run_independent_vs_dependent(workers=(1, 2), backend="engine" if plan.threads else "modelled")
        return pl.independence_checks(rows)

    def devices_07() -> list[Any]:
        plan = pl.plan_devices()
        return pl.two_device_checks(ex.run_two_devices(backend="engine" if plan.threads else "modelled"))

    def sweep() -> list[Any]:  # notebook 5's default-mode sweep (its default sizes)
        return ex.sweep_sync_async(ops=(300,), repeat=3, backend="auto").lessons()

    def book_loop() -> list[Any]:  # notebook 5's hand-timed cell, on the engine as a CPU-only reader runs it
        import torch

        from d2l_async.benchmark import Benchmark
        from d2l_async.devices import machine
        from d2l_async.engine import ThreadedEngine

        n = 10_000
        with ThreadedEngine(workers=1, devices=("cpu:0",)) as eng:
            x = eng.array(torch.ones(1), name="x")
            (x + 1).wait_to_read()
            sync_runs, async_runs = [], []
            for _ in range(3):
                with Benchmark("synchronous", file=None) as t:
                    for _ in range(n):
                        y = x + 1
                        y.wait_to_read()
                sync_runs.append(t.elapsed)
                with Benchmark("asynchronous", file=None) as t:
                    for _ in range(n):
                        y = x + 1
                async_runs.append(t.elapsed)
        return [ex.sync_async.book_loop_check(sync_runs, async_runs, ops=n, machine=machine())]

    def overlap() -> list[Any]:
        ov = ex.run_overlap(bucket_cap_mb=1.0)
        return [*ddp.overlap_checks(ov), ddp.machine_check(ov)]

    return [
        Group("01 asynchrony", lambda: ex.asynchrony.checks(ex.run_asynchrony(backend="auto")), (0, 1)),
        Group("02 independent chains", devices_02, (0,)),
        Group("03 barriers", lambda: ex.barriers.checks(ex.run_barriers(backend="auto")), (0,)),
        Group("04 blockers", lambda: ex.blockers.checks(ex.run_blockers(backend="auto")), (0, 1, 2)),
        Group("05 book's loop", book_loop, (0,)),
        Group("05 sync vs async", lambda: ex.run_sync_async(backend="auto").lessons(), (0, 1)),
        Group("05 sweep", sweep, (0,)),
        Group("06 sync every k", queue, (2, 3)),
        Group("07 two devices", devices_07, (0,)),
        Group("08 scheduling", scheduling, (0,)),
        Group("10 async collective", lambda: collective.checks(ex.run_collective()), (3,)),
        Group("10 late peer", lambda: collective.checks(ex.run_collective(peer_delay_ms=40, size=768))[3:], (0,)),
        Group("10 DDP overlap", overlap, (3,)),
        Group("10 straggler", lambda: ddp.straggler_checks(ex.run_straggler()), (0, 1)),
        Group("10 modelled link", lambda: modelled_link.checks(modelled_link.run_modelled_overlap(bucket_cap_mb=1.0))),
    ]


def _outcome(c: Any) -> str:
    return "modelled" if not c.evidence else "holds" if c.holds is True else "fails" if c.holds is False else "unsure"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of every group (default 5)")
    ap.add_argument("--pin", type=int, default=None, metavar="CPU",
                    help="pin to this CPU beside a busy process (the one-core condition)")
    ap.add_argument("--only", action="append", default=[], help="group key prefix, e.g. 06 (repeatable)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error(f"--runs must be >= 1, got {args.runs}")
    from tests.one_core import rules
    from tests.one_core.pinned import busy_neighbour

    if args.pin is not None:
        if args.pin not in os.sched_getaffinity(0):
            ap.error(f"--pin {args.pin}: this process may use CPUs {sorted(os.sched_getaffinity(0))}")
        os.sched_setaffinity(0, {args.pin})
    condition = (f"pinned to CPU {args.pin} beside a busy process" if args.pin is not None
                 else f"as is: {len(os.sched_getaffinity(0))} CPUs, no pinning")
    from d2l_async.devices import machine

    groups = [g for g in _groups() if not args.only or any(g.key.startswith(o) for o in args.only)]
    if not groups:
        ap.error(f"no group matches {args.only}")
    found: dict[tuple[str, int], dict[str, Any]] = {}
    loads: list[float] = []
    t0 = time.perf_counter()
    with busy_neighbour(args.pin is not None):
        before = machine()
        for run in range(args.runs):
            for g in groups:
                load0 = os.getloadavg()[0]
                try:
                    checks = g.run()
                    error = ""
                except Exception as exc:  # noqa: BLE001 - a failed run is counted and reported, not fatal
                    checks, error = [], f"{type(exc).__name__}: {exc}"
                load1 = os.getloadavg()[0]
                loads += [load0, load1]
                if error:
                    row = found.setdefault((g.key, -1), {"group": g.key, "claim": "(the experiment raised)",
                                                         "errors": []})
                    row["errors"].append(error[:300])
                for i, c in enumerate(checks):
                    row = found.setdefault((g.key, i), {
                        "group": g.key, "index": i, "claim": c.name, "headline": i in g.headline,
                        "holds": 0, "fails": 0, "unsure": 0, "modelled": 0, "word_problems": [], "texts": []})
                    row[_outcome(c)] += 1
                    row["texts"].append(c.text)
                    row["word_problems"] += [str(p) for p in rules.check_problems(c)]
                marks = " ".join(c.mark for c in checks) or "error"
                print(f"run {run + 1}/{args.runs} {g.key:22s} {marks:14s} load {load0:4.1f} -> {load1:4.1f}"
                      + (f"  {error[:100]}" if error else ""), flush=True)
    rows = list(found.values())
    for r in rows:
        if "holds" in r:
            evidence = r["holds"] + r["fails"] + r["unsure"]
            r["holds_rate"] = round(r["holds"] / evidence, 2) if evidence else None
    entry = {
        "condition": condition, "runs": args.runs, "mode": "default", "machine": before.describe(),
        "usable_cpus": before.usable_cpus, "load_avg_min": round(min(loads), 2), "load_avg_max": round(max(loads), 2),
        "load_avg_median": round(sorted(loads)[len(loads) // 2], 2), "seconds": round(time.perf_counter() - t0, 1),
        "python": platform.python_version(), "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "only": args.only, "claims": rows,
    }
    old = json.loads(OUT.read_text()) if OUT.exists() else {}
    conditions = {c["condition"]: c for c in old.get("conditions", [])}
    previous = conditions.get(condition)
    if args.only and previous is not None:
        # a rerun of some groups replaces only their rows: the other groups keep theirs, and the entry's
        # own load and date (which describe those rows); this run is recorded under "updates"
        mine = {g.key for g in groups}
        update = {k: entry[k] for k in ("runs", "machine", "load_avg_min", "load_avg_max", "load_avg_median",
                                         "seconds", "python", "when", "only")}
        for r in rows:
            r["measured"] = {k: update[k] for k in ("when", "runs", "load_avg_min", "load_avg_max", "load_avg_median")}
        kept = [r for r in previous.get("claims", []) if r.get("group") not in mine]
        order = [g.key for g in _groups()]
        merged = sorted(kept + rows, key=lambda r: (order.index(r["group"]) if r.get("group") in order else len(order),
                                                    r.get("index", -1)))
        entry = {**previous, "claims": merged,
                 "updates": [u for u in previous.get("updates", []) if u.get("only") != args.only] + [update]}
    conditions[condition] = entry
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"what": __doc__.splitlines()[0], "conditions": list(conditions.values())},
                              indent=1, ensure_ascii=False) + "\n")
    print(f"\n{condition}; load {round(min(loads), 2)}-{round(max(loads), 2)} (median "
          f"{round(sorted(loads)[len(loads) // 2], 2)}); {round(time.perf_counter() - t0, 1)} s")
    for r in rows:
        if "holds" not in r:
            print(f"  {r['group']:22s} raised {len(r['errors'])}x: {r['errors'][0][:120]}")
            continue
        star = "*" if r["headline"] else " "
        print(f" {star}{r['group']:22s} ✔{r['holds']} ✘{r['fails']} ?{r['unsure']} ◇{r['modelled']}  {r['claim'][:90]}"
              + (f"  WORDS: {r['word_problems'][0][:80]}" if r["word_problems"] else ""))
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
