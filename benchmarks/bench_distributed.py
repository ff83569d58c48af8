"""Data-parallel step time: gradients all-reduced after the backward pass vs bucketed during it (DDP).

Two gloo ranks (NCCL with ``--backend nccl`` on a machine with two GPUs) train the same MLP both
ways in the *same* processes, steps interleaved (after_backward, bucketed, after_backward, ...), so a
change of the machine's load hits both settings alike (:func:`d2l_async.experiments.run_overlap`).
Each timed step starts after a barrier and ends when the optimizer step is done on that rank; a
step's time is the slowest rank's.  We repeat the whole launch ``--repeat`` times and keep every
raw step, reporting per setting the median and the inter-quartile range, the ratio after/bucketed,
and, from each run's profiled step, the fraction of communication hidden behind gradient compute.

The first launch also starts the fork server that holds torch (several seconds, reported apart as
``cold_launch_s``); later launches cost well under a second on an idle machine.

On a CPU the two ranks and their gloo threads share the cores: with fewer spare cores than busy
threads (2 per rank) bucketing cannot speed anything up, and the JSON says how many were spare.

Run: ``.venv/bin/python benchmarks/bench_distributed.py [--repeat 3] [--steps 20] [--ranks 2]``;
writes ``benchmarks/results/distributed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _provenance import command  # benchmarks/, the script's own folder

OUT = Path(__file__).parent / "results" / "distributed.json"


def _quartiles(xs: list[float]) -> dict[str, float]:
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return {"median_ms": 1e3 * statistics.median(xs), "q1_ms": 1e3 * q[0], "q3_ms": 1e3 * q[2],
            "min_ms": 1e3 * min(xs), "max_ms": 1e3 * max(xs), "steps": len(xs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="launches (each trains both ways)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per setting and launch")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--bucket-cap-mb", type=float, default=1.0)
    ap.add_argument("--backend", default="gloo", choices=("gloo", "nccl", "auto"))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    from d2l_async.devices import describe_machine, machine
    from d2l_async.experiments import run_overlap

    before = machine()
    steps: dict[str, list[float]] = {"after_backward": [], "bucketed": []}
    hidden: list[float] = []
    launches: list[float] = []
    for i in range(args.repeat + 1):  # launch 0 is cold (starts the fork server); it is timed, not counted
        t0 = time.perf_counter()
        r = run_overlap(ranks=args.ranks, bucket_cap_mb=args.bucket_cap_mb, width=args.width, depth=args.depth,
                        batch=args.batch, steps=args.steps, backend=args.backend, timeout=600)
        launches.append(time.perf_counter() - t0)
        if i == 0:
            continue
        for label in steps:
            steps[label] += list(r.step_s[label])
        hidden += [c.hidden_fraction for c in r.comm["bucketed"]]
        print(f"launch {i}: median step after_backward {1e3 * r.median_step('after_backward'):.1f} ms, "
              f"bucketed {1e3 * r.median_step('bucketed'):.1f} ms ({launches[-1]:.2f} s)", flush=True)
    after = machine()
    summary = {label: _quartiles(xs) for label, xs in steps.items()}
    ratio = summary["after_backward"]["median_ms"] / summary["bucketed"]["median_ms"]
    result: dict[str, Any] = {
        "what": "data-parallel MLP step: all-reduce after backward vs bucketed (DDP), same processes, steps interleaved",
        "model": r.model, "gradients_mb": r.params_mb, "bucket_cap_mb": args.bucket_cap_mb, "ranks": args.ranks,
        "backend": r.where.backend, "device": r.device,
        "after_backward": summary["after_backward"], "bucketed": summary["bucketed"],
        "ratio_after_over_bucketed": ratio,
        "hidden_fraction_bucketed_median": statistics.median(hidden) if hidden else 0.0,
        "cold_launch_s": launches[0], "warm_launch_s": statistics.median(launches[1:]) if len(launches) > 1 else None,
        "usable_cpus": before.usable_cpus, "spare_cpus_before": before.spare_cpus, "spare_cpus_after": after.spare_cpus,
        "busy_threads": 2 * args.ranks if r.where.backend == "gloo" else None,
        "load_avg_before": before.load_avg, "load_avg_after": after.load_avg,
        "machine": describe_machine(before), "python": platform.python_version(), "argv": sys.argv[1:],
        "command": command(),
        "raw_ms": {label: [1e3 * x for x in xs] for label, xs in steps.items()},
        "note": "CPU numbers (gloo), not GPU numbers" if r.where.backend == "gloo" else "NCCL on GPUs",
    }
    print(f"\n{r.model}, {r.params_mb:.1f} MB of gradients, {args.ranks} {r.where.backend} ranks, "
          f"{args.repeat} launches x {args.steps} steps:")
    for label, s in summary.items():
        print(f"  {label:15s} median {s['median_ms']:.1f} ms (IQR {s['q1_ms']:.1f}-{s['q3_ms']:.1f})")
    print(f"  after/bucketed {ratio:.2f}x; hidden fraction (bucketed) {result['hidden_fraction_bucketed_median']:.0%}; "
          f"launch cold {launches[0]:.1f} s, warm {result['warm_launch_s']:.2f} s")
    print(f"  machine: {result['machine']}; load average {before.load_avg:.1f} -> {after.load_avg:.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"saved {os.path.relpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
