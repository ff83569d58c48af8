"""Build time and JSON size of ``plot_timeline`` and ``plot_queue_length`` on large traces.

Inputs: the shipped A100 training step (109k raw profiler events, 67k trace events after parsing)
and a 10,000-op synthetic engine-like trace (one frontend, two virtual workers, a final block).
Loading the trace is not timed; each figure is built ``--repeat`` times (after one warm-up build)
and we report the median and every raw run, plus the size of ``fig.to_json()``.
Targets: build <= 2 s and JSON <= 10 MB for each figure on the A100 trace.

Run: ``.venv/bin/python benchmarks/bench_figures.py [--repeat 5]``; writes
``benchmarks/results/figures.json``.
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

import numpy as np

from _provenance import command  # benchmarks/, the script's own folder

OUT = Path(__file__).parent / "results" / "figures.json"
TARGET_BUILD_S = 2.0
TARGET_JSON_MB = 10.0


def synthetic_engine_trace(n_ops: int = 10_000, workers: int = 2):
    """An engine-like recording: pushes 2 µs apart, ops of 4–8 µs, reads/writes, a final print."""
    from d2l_async.trace import Event, Lane, LaneRole, Trace

    rng = np.random.default_rng(0)
    lanes = [Lane("frontend", LaneRole.FRONTEND)] + [
        Lane(f"cpu:0 worker {w}", LaneRole.BACKEND, "cpu:0", True, w) for w in range(workers)]
    ev, free, t = [], [0.0] * workers, 0.0
    for i in range(n_ops):
        push, t = t, t + 2e-6
        ev.append(Event("frontend", "launch", "push add", push, t, source=f"line 3: a{i % 7} += 1"))
        w = i % workers
        start = max(free[w], t + 1e-6)
        free[w] = start + rng.uniform(4e-6, 8e-6)
        ev.append(Event(f"cpu:0 worker {w}", "op", "add", start, free[w], issue=push, device="cpu:0",
                        reads=(f"a{i % 7}",), writes=(f"a{i % 7}",), nbytes=4096))
    ev.append(Event("frontend", "block", "wait_to_read", t, max(free), reason="print", source="line 4: print(a)"))
    return Trace.from_events(ev, lanes=lanes, meta={"source": "engine", "virtual": True,
                                                    "device": "synthetic engine-like trace"})


def measure(build, repeat: int) -> dict:
    build()  # warm-up: imports, plotly validators
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fig = build()
        runs.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    size = len(fig.to_json())
    to_json_s = time.perf_counter() - t0
    return {"median_s": statistics.median(runs), "min_s": min(runs), "max_s": max(runs), "runs_s": runs,
            "json_mb": size / 1e6, "to_json_s": to_json_s, "n_traces": len(fig.data)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    from d2l_async import viz
    from d2l_async.data import load_sample

    inputs = {"a100_training_step": load_sample("a100_training_step"), "synthetic_engine_10k": synthetic_engine_trace()}
    results: dict = {"benchmark": "build time and fig.to_json() size of plot_timeline / plot_queue_length",
                     "command": command(), "load_average_1min_before": os.getloadavg()[0],
                     "repeat": args.repeat, "targets": {"build_s": TARGET_BUILD_S, "json_mb": TARGET_JSON_MB},
                     "machine": f"{platform.processor() or platform.machine()}, python {platform.python_version()}",
                     "inputs": {}}
    ok = True
    for name, trace in inputs.items():
        row = {"events": len(trace)}
        for fname, build in (("plot_timeline", lambda: viz.plot_timeline(trace)),
                             ("plot_queue_length", lambda: viz.plot_queue_length(trace, in_flight=True, memory=True))):
            m = measure(build, args.repeat)
            row[fname] = m
            met = m["median_s"] <= TARGET_BUILD_S and m["json_mb"] <= TARGET_JSON_MB
            ok &= met or name != "a100_training_step"
            print(f"{name:22s} {fname:18s} build median {m['median_s']:.3f} s (min {m['min_s']:.3f}, "
                  f"max {m['max_s']:.3f}), JSON {m['json_mb']:.2f} MB{'' if met else '  OVER TARGET'}")
        results["inputs"][name] = row
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
