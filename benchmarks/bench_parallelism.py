"""Parallelism lessons of notebooks 02 and 07: speedups on modelled-time devices and on threads, one run.

Four numbers per device kind (modelled-time devices, then the engine's thread-devices), each the
median over ``--repeat`` rounds of a ratio taken within one round (every variant run once, back to
back), with the experiments the notebooks call in their default (not quick) workload:

* 07, two devices: ``t_one / t_concurrent`` -- the same 2n products on ONE device, against n on each
  of two devices issued together (expected >= 1.8x on modelled devices);
* 07, with a barrier between them: ``t_one / t_serialized`` (expected <= 1.1x: a barrier makes two
  devices no faster than one);
* 02, independent chains: 1 worker vs 2 (expected >= 1.8x on modelled devices);
* 02, one dependent chain: 1 worker vs 2 (expected <= 1.1x: nothing to run side by side);
* 07's MLP: share of the copy time that ran beside compute.

Threads reach those numbers only with a spare core per device; the JSON keeps the machine's usable
and busy CPUs beside them.  The modelled devices' expectations are checked (exit status 1 when
missed); the threads' are reported, not checked -- on one core they cannot hold, which is the point.

Run pinned to one core beside a busy process, the case the modelled devices exist for::

    .venv/bin/python benchmarks/bench_parallelism.py --cpu 0 --busy

(``--cpu N`` pins this process and every thread it starts to CPU N; ``--busy`` starts a spinning
competitor pinned to the same CPU and stops it at the end.)  Writes
``benchmarks/results/parallelism.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _provenance import command  # benchmarks/, the script's own folder

OUT = Path(__file__).parent / "results" / "parallelism.json"
EXPECT = {"two_devices": (">=", 1.8), "with_barrier": ("<=", 1.1), "independent_chains": (">=", 1.8),
          "dependent_chain": ("<=", 1.1)}


def one_device(ops: int, size: int, model: Any, repeat: int) -> float:
    """Median seconds of the two chains of ``ops`` products on ONE device, one worker."""
    from d2l_async.engine import ThreadedEngine
    from d2l_async.experiments._common import stable_matrix

    times = []
    with ThreadedEngine(devices=("cpu:0",), model=model, record=False) as eng:
        m = eng.array(stable_matrix(size))
        for k in range(repeat + 1):
            t0 = time.perf_counter()
            chains = [m, m]
            for _ in range(ops):
                chains = [c @ m for c in chains]
            eng.waitall()
            if k:  # the first run warms up
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(kind: str, repeat: int) -> dict[str, Any]:
    """Each repeat runs every variant once, back to back, and its ratios are taken within the repeat:
    a shared machine's load changes from second to second, so a ratio of two medians taken minutes
    apart would measure the load as much as the schedule.  The medians of the ratios are reported."""
    from d2l_async.engine import DeviceModel
    from d2l_async.experiments import parallel_lessons as pl
    from d2l_async.experiments import run_independent_vs_dependent, run_mlp_parallel, run_two_devices

    backend = "modelled" if kind == "modelled" else "engine"
    model = DeviceModel() if kind == "modelled" else None
    t0 = time.perf_counter()
    ratios: dict[str, list[float]] = {name: [] for name in EXPECT}
    raw: list[dict[str, float]] = []
    for _ in range(repeat):
        two = run_two_devices(backend=backend, model=model, repeat=1)
        t_one = one_device(two.ops, two.size, model, 1)
        rows = run_independent_vs_dependent(backend=backend, model=model, repeat=1, workers=(1, 2))
        ratios["two_devices"].append(t_one / two.concurrent_seconds)
        ratios["with_barrier"].append(t_one / two.serialized_seconds)
        ratios["independent_chains"].append(rows[0].independent_seconds / rows[1].independent_seconds)
        ratios["dependent_chain"].append(rows[0].dependent_seconds / rows[1].dependent_seconds)
        raw.append({"one_device": t_one, "concurrent": two.concurrent_seconds, "serialized": two.serialized_seconds,
                    "independent_1w": rows[0].independent_seconds, "independent_2w": rows[1].independent_seconds,
                    "dependent_1w": rows[0].dependent_seconds, "dependent_2w": rows[1].dependent_seconds})
    mlp = run_mlp_parallel(backend=backend, model=model)
    o = mlp.overlap
    copies = o.both + o.only_b
    checks = [*pl.two_device_checks(two), *pl.independence_checks(rows), *pl.mlp_checks(mlp)]
    ideal = None
    if model is not None:  # what the model alone predicts for one product (no CPU, no wake-ups)
        ideal = model.matmul_seconds(two.size, two.size, two.size)
    return {
        "device": two.device,
        "workload": {"two_devices": {"ops_per_device": two.ops, "size": two.size},
                     "chains": {"ops": rows[0].ops, "size": rows[0].size, "chains": rows[0].chains},
                     "mlp": {"batches": mlp.batches, "batch_size": mlp.batch_size, "hidden": mlp.hidden}},
        "modelled_seconds_per_product": ideal,
        "speedups": {name: statistics.median(v) for name, v in ratios.items()},
        "speedups_per_repeat": ratios,
        "seconds_per_repeat": raw,
        "mlp_seconds": mlp.seconds,
        "mlp_copy_time_hidden": o.both / copies if copies > 0 else 0.0,
        "modelled": two.modelled,
        "lesson_checks_last_repeat": [c.text for c in checks],
        "wall_s": time.perf_counter() - t0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=None, help="pin this process (and its threads) to this CPU")
    ap.add_argument("--busy", action="store_true", help="start a spinning competitor on the same CPUs")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})  # before torch starts any thread: they inherit it
    busy = None
    if args.busy:
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                preexec_fn=lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
    try:
        from d2l_async.devices import machine

        m = machine()
        print(f"machine: {m.describe()}; pinned to CPUs {sorted(os.sched_getaffinity(0))}"
              f"{' beside a busy process' if busy else ''}")
        results = {kind: bench(kind, args.repeat) for kind in ("modelled", "threads")}
    finally:
        if busy is not None:
            busy.kill()
            busy.wait(timeout=10)
    failed = []
    for kind, r in results.items():
        print(f"\n{kind}: {r['device']}")
        for name, value in r["speedups"].items():
            op, bound = EXPECT[name]
            ok = value >= bound if op == ">=" else value <= bound
            mark = ("ok" if ok else "MISSED") if kind == "modelled" else "(reported)"
            if kind == "modelled" and not ok:
                failed.append(name)
            print(f"  {name:20s} {value:5.2f}x   expected {op} {bound}  {mark}")
        print(f"  MLP: {r['mlp_copy_time_hidden']:.0%} of the copy time ran beside compute; run {r['wall_s']:.1f} s")
        for line in r["lesson_checks_last_repeat"]:
            print("   ", line)
    doc = {"benchmark": "parallelism", "command": command(), "python": platform.python_version(),
           "machine": m.describe(),
           "usable_cpus": m.usable_cpus, "busy_cpus": m.busy_cpus, "load_avg": m.load_avg,
           "pinned_to": sorted(os.sched_getaffinity(0)), "busy_competitor": bool(busy), "repeat": args.repeat,
           "expected_modelled": EXPECT, "results": results, "missed": failed}
    if not args.no_save:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(doc, indent=2, default=str))
        print(f"\nsaved {OUT}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
