"""How often each headline claim of the chapter ends ✔, ✘, ? or ◇ in default mode, run after run.

A notebook whose markdown states a claim should show it hold on an ordinary machine, most of the time;
where it cannot, the markdown should stop stating it.  The claims are the registry's
(:mod:`d2l_async.claims`, ``headline=True``), the plain-PyTorch ones included; this script runs the
experiments behind them exactly as the notebooks do (default mode: no ``D2L_ASYNC_QUICK``; the same
functions, arguments and cells, in a plain Python process rather than a kernel) ``--runs`` times, group
after group, and counts each headline claim's outcome: ✔ holds, ✘ fails (with its measured reason), ? can't
tell, ◇ a modelled illustration (never counted as evidence).  A headline claim no group produces is an
error: the table covers every one.

Two conditions (see the numbers page):

* quiet: the machine as it is (``python benchmarks/bench_claims.py``);
* busy: beside two busy processes spinning on this process's CPUs (``--busy 2``; ``--pin CPU`` also
  narrows everything to one CPU, rank processes and engine threads included).

The load average is read before and after each group and stored with the counts.  Writes
``benchmarks/results/claims.json``: one entry per condition (a rerun replaces that condition's entry; a
rerun with ``--only`` replaces only those groups' rows, marked with their own load and date).

Run: ``.venv/bin/python benchmarks/bench_claims.py [--runs 5] [--busy 2] [--pin CPU] [--only 06 --only 10]``.
"""

from __future__ import annotations

import argparse
import contextlib
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
    """One notebook's experiments, run as its cells run them, returning their checks.

    Attributes:
        key: ``"<notebook> <what>"``, e.g. ``"06 sync every k"``.
        run: runs the experiment(s) and returns the checks the notebook shows.
    """

    key: str
    run: Callable[[], list[Any]]


def _groups() -> list[Group]:
    import torch

    import d2l_async
    from d2l_async import config
    from d2l_async import experiments as ex
    from d2l_async.benchmark import Benchmark
    from d2l_async.devices import machine, num_gpus
    from d2l_async.engine import ThreadedEngine
    from d2l_async.torch_async import lessons as pt

    def asynchrony() -> list[Any]:
        return ex.run_asynchrony(backend="auto").checks()

    def pt_01() -> list[Any]:  # notebook 01's plain-PyTorch cell, its timed parts
        size, n = config.scale(1000, 500), config.scale(10, 5)
        with d2l_async.asynchronous():
            a = torch.randn(size=(size, size))
            torch.mm(a, a)
            d2l_async.synchronize()
            with Benchmark("naive", sync=False, file=None) as naive:
                for _ in range(n):
                    a = torch.randn(size=(size, size))
                    torch.mm(a, a)
            d2l_async.synchronize()
            with Benchmark("synchronized", sync=False, file=None) as synced:
                for _ in range(n):
                    a = torch.randn(size=(size, size))
                    torch.mm(a, a)
                d2l_async.synchronize()
        with Benchmark("eager", sync=False, file=None) as eager:
            for _ in range(n):
                a = torch.randn(size=(size, size))
                torch.mm(a, a)
        return list(pt.returned_before_done(naive.elapsed, synced.elapsed, eager.elapsed, n, machine()))

    def graph_02() -> list[Any]:  # notebook 02: z = x * y + 2, then the chains
        eng = ThreadedEngine(workers=2, devices=("cpu:0",))
        n = 1000
        w = eng.array(torch.ones(n, n))
        (w * w + 2).wait_to_read()
        eng.reset_trace()
        x, y = eng.array(torch.ones(n, n), name="x"), eng.array(torch.ones(n, n), name="y")
        z = x * y + 2
        print(z, file=open(os.devnull, "w"))
        eng.waitall()
        waited = ex.frontend_wait_check(eng.trace(), machine=machine())
        eng.shutdown()
        plan = ex.plan_devices()
        rows = ex.run_independent_vs_dependent(workers=(1, 2), backend="engine" if plan.threads else "modelled")
        return [waited, *rows.checks()]

    def barriers_03() -> list[Any]:
        return ex.run_barriers(backend="auto").checks()

    def pt_03() -> list[Any]:  # notebook 03's plain-PyTorch cell
        n, k = config.scale(800, 500), config.scale(10, 8)
        out = {}
        for workers in (2, 1):
            with d2l_async.asynchronous(workers=workers):
                a = torch.eye(n) + torch.rand(n, n) / n
                x = torch.ones(2, 2)
                d2l_async.synchronize()
                t0 = time.perf_counter()
                b = a
                for _ in range(k):
                    b = b @ a
                z = x * 2 + 1
                z.sum().item()
                t_item = time.perf_counter() - t0
                d2l_async.synchronize()
                out[workers] = (t_item, time.perf_counter() - t0)
        return list(pt.narrow_waits(*out[2], *out[1], machine()))

    def blockers_04() -> list[Any]:
        n = config.scale(1000, 300)
        with ThreadedEngine(workers=1, devices=("cpu:0",)) as eng:
            a = eng.array(torch.rand(n, n) / n, name="a")
            (a @ a).wait_to_read()
            eng.reset_trace()
            with contextlib.redirect_stdout(open(os.devnull, "w")):
                b = a @ a; print(b.sum())  # noqa: E702
            b = a @ a; b.sum().item()  # noqa: E702
            b = a @ a; b.asnumpy()  # noqa: E702
            b = a @ a; float(b.sum())  # noqa: E702
            b = a @ a
            if b.sum():
                pass
            eng.waitall()
            report = ex.report_check(eng.trace(), expected=5, size=n, machine=machine())
        return [report, *ex.run_blockers(backend="auto").checks()]

    def book_loop_05() -> list[Any]:  # notebook 05's hand-timed cell, on the engine as a CPU-only reader runs it
        n = config.scale(10_000, 1_000)
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
                        y = x + 1  # noqa: F841
                async_runs.append(t.elapsed)
            kind = eng.engine_kind
        return [ex.book_loop_check(sync_runs, async_runs, ops=n, machine=machine(), engine=kind)]

    def pt_05() -> list[Any]:  # notebook 05's plain-PyTorch cell
        n, repeats = config.scale(10_000, 1_000), 3
        sync_pt, async_pt, eager_pt = [], [], []
        with d2l_async.asynchronous() as rt:
            x = torch.ones(1)
            for _ in range(100):
                y = x + 1
            d2l_async.synchronize()
            for _ in range(repeats):
                with Benchmark("sync", file=None) as t:
                    for _ in range(n):
                        y = x + 1
                        d2l_async.synchronize()
                sync_pt.append(t.elapsed)
                with Benchmark("async", file=None) as t:
                    for _ in range(n):
                        y = x + 1
                    d2l_async.synchronize()
                async_pt.append(t.elapsed)
        x = torch.ones(1)
        for _ in range(repeats):
            with Benchmark("eager", file=None) as t:
                for _ in range(n):
                    y = x + 1  # noqa: F841
            eager_pt.append(t.elapsed)
        return list(pt.increments(sync_pt, async_pt, eager_pt, n, machine(), trace=rt.trace()))

    def queue_05b() -> list[Any]:
        big = ex.run_sync_async(ops=config.scale(2_000, 300), numel=100_000, repeat=3, backend="auto")
        return [big.queue_lesson()]

    def sweep_05b() -> list[Any]:
        return ex.sweep_sync_async(ops=(config.scale(300, 50),), repeat=3, backend="auto").checks()

    def queue_06() -> list[Any]:
        ex.run_queue_memory(batches=2)  # the notebook's warm-up
        runs = ex.compare_sync_every(ks=(None, 1, 4, 16))
        work = ex.compare_sync_every(ks=(None, 1), frontend_work_s=runs.backend_per_batch)
        return [*runs.checks(), *work.checks()]

    def devices_07() -> list[Any]:
        plan = ex.plan_devices()
        kind = "cuda" if num_gpus() >= 2 else "engine" if plan.threads else "modelled"
        return [*ex.run_two_devices(backend=kind).checks(), *ex.run_mlp_parallel(backend=kind).checks()]

    def scheduling_08() -> list[Any]:
        ex.run_scheduling(workers=(1,), ops=100)  # the notebook's warm-up
        return ex.run_scheduling(workers=(1, 2, 4, 8, 16)).checks()

    def profiling_09() -> list[Any]:
        samples = ex.sample_summaries()
        return [*ex.run_profiling(steps=2, backend="auto").checks(), *samples.checks(), ex.hta_check(samples[0])]

    def collective_10() -> list[Any]:
        late = ex.run_collective(peer_delay_ms=40, size=config.scale(768, 512))
        return [*ex.run_collective().checks(), *late.checks()]

    def ddp_10b() -> list[Any]:
        return [*ex.run_overlap(bucket_cap_mb=1.0).checks(), *ex.run_straggler().checks(),
                *ex.run_modelled_overlap(bucket_cap_mb=1.0).checks()]

    return [Group("00/01 asynchrony", asynchrony), Group("01 plain torch", pt_01), Group("02 dependency graph", graph_02),
            Group("03 barriers", barriers_03), Group("03 plain torch", pt_03), Group("04 blockers", blockers_04),
            Group("05 book's loop", book_loop_05), Group("05 plain torch", pt_05), Group("05b queue", queue_05b),
            Group("05b sweep", sweep_05b), Group("06 sync every k", queue_06), Group("07 devices", devices_07),
            Group("08 scheduling", scheduling_08), Group("09 profiling", profiling_09),
            Group("10 collective", collective_10), Group("10b DDP", ddp_10b)]


def _outcome(c: Any) -> str:
    return "modelled" if not c.evidence else "holds" if c.holds is True else "fails" if c.holds is False else "unsure"


@contextlib.contextmanager
def _busy(n: int):
    """``n`` processes spinning on this process's CPUs for the duration of the block; always killed."""
    from tests.one_core.pinned import busy_neighbour

    with contextlib.ExitStack() as stack:
        for _ in range(n):
            stack.enter_context(busy_neighbour(True))
        yield


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of every group (default 5)")
    ap.add_argument("--busy", type=int, default=0, metavar="N", help="beside N busy processes (the busy condition: 2)")
    ap.add_argument("--pin", type=int, default=None, metavar="CPU", help="pin everything to this CPU")
    ap.add_argument("--only", action="append", default=[], help="group key prefix, e.g. 06 (repeatable)")
    args = ap.parse_args()
    if args.runs < 1 or args.busy < 0:
        ap.error(f"--runs must be >= 1 and --busy >= 0, got {args.runs} and {args.busy}")
    import d2l_async.experiments  # noqa: F401 - declares the claims
    import d2l_async.torch_async.lessons  # noqa: F401
    from d2l_async import claims
    from d2l_async.devices import machine
    from tests.one_core import rules

    if args.pin is not None:
        if args.pin not in os.sched_getaffinity(0):
            ap.error(f"--pin {args.pin}: this process may use CPUs {sorted(os.sched_getaffinity(0))}")
        os.sched_setaffinity(0, {args.pin})
    where = f"pinned to CPU {args.pin}" if args.pin is not None else f"{len(os.sched_getaffinity(0))} CPUs"
    condition = f"{where}, beside {args.busy} busy process{'es' if args.busy != 1 else ''}" if args.busy else \
        f"{where}, as is"
    headline = {c.key: c for c in claims.headline_claims()}
    groups = [g for g in _groups() if not args.only or any(g.key.startswith(o) for o in args.only)]
    if not groups:
        ap.error(f"no group matches {args.only}")
    found: dict[str, dict[str, Any]] = {}
    errors: dict[str, list[str]] = {}
    loads: list[float] = []
    t0 = time.perf_counter()
    with _busy(args.busy):
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
                    errors.setdefault(g.key, []).append(error[:300])
                for c in checks:
                    if c.claim not in headline:
                        continue
                    k = headline[c.claim]
                    row = found.setdefault(c.claim, {
                        "claim": c.claim, "group": g.key, "notebooks": list(k.notebooks), "sentence": k.sentence,
                        "name": c.name,
                        "holds": 0, "fails": 0, "unsure": 0, "modelled": 0, "causes": {}, "word_problems": [],
                        "texts": [], "load_avg": []})
                    row[_outcome(c)] += 1
                    if c.cause:
                        row["causes"][c.cause] = row["causes"].get(c.cause, 0) + 1
                    row["texts"].append(c.text)
                    row["load_avg"] += [round(load0, 2), round(load1, 2)]
                    row["word_problems"] += [str(p) for p in rules.check_problems(c) + rules.claim_problems(c)]
                marks = " ".join(c.mark for c in checks) or "error"
                print(f"run {run + 1}/{args.runs} {g.key:22s} {marks:14s} load {load0:4.1f} -> {load1:4.1f}"
                      + (f"  {error[:100]}" if error else ""), flush=True)
    missing = sorted(k for k, c in headline.items() if k not in found and (not args.only or any(
        n.startswith(tuple(args.only)) for n in c.notebooks)))
    rows = sorted(found.values(), key=lambda r: r["claim"])
    for r in rows:
        evidence = r["holds"] + r["fails"] + r["unsure"]
        r["holds_rate"] = round(r["holds"] / evidence, 2) if evidence else None
        r["load_avg_min"], r["load_avg_max"] = min(r["load_avg"]), max(r["load_avg"])
    entry = {
        "condition": condition, "busy_processes": args.busy, "pinned": args.pin, "runs": args.runs, "mode": "default",
        "machine": before.describe(), "usable_cpus": before.usable_cpus, "load_avg_min": round(min(loads), 2),
        "load_avg_max": round(max(loads), 2), "load_avg_median": round(sorted(loads)[len(loads) // 2], 2),
        "seconds": round(time.perf_counter() - t0, 1), "python": platform.python_version(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "only": args.only, "claims": rows, "errors": errors,
        "missing": missing,
    }
    old = json.loads(OUT.read_text()) if OUT.exists() else {}
    conditions = {c["condition"]: c for c in old.get("conditions", []) if "busy_processes" in c}
    previous = conditions.get(condition)
    if args.only and previous is not None:
        # a rerun of some groups replaces only their claims' rows; the others keep theirs
        measured = {k: entry[k] for k in ("when", "runs", "load_avg_min", "load_avg_max", "load_avg_median")}
        for r in rows:
            r["measured"] = measured
        mine = {r["claim"] for r in rows}
        merged = sorted([r for r in previous.get("claims", []) if r["claim"] not in mine] + rows,
                        key=lambda r: r["claim"])
        entry = {**previous, "claims": merged, "missing": sorted(set(previous.get("missing", [])) - mine),
                 "updates": [*previous.get("updates", []), {**measured, "only": args.only}]}
    conditions[condition] = entry
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"what": __doc__.splitlines()[0], "conditions": list(conditions.values())},
                              indent=1, ensure_ascii=False) + "\n")
    print(f"\n{condition}; load {entry['load_avg_min']}-{entry['load_avg_max']}; {entry['seconds']} s")
    for r in rows:
        print(f"  {r['claim']:28s} ✔{r['holds']} ✘{r['fails']} ?{r['unsure']} ◇{r['modelled']}  {r['sentence'][:70]}"
              + (f"  WORDS: {r['word_problems'][0][:80]}" if r["word_problems"] else ""))
    for g, errs in errors.items():
        print(f"  {g} raised {len(errs)}x: {errs[0][:120]}")
    if missing:
        print(f"headline claims no group produced: {missing}")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
