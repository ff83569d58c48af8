"""What a class costs: N = 1, 4, 8 simulated students at once on a real local JupyterHub.

Each student starts a server and runs notebooks 01 and 07 in quick mode through the REST and kernel
APIs (deploy/jupyterhub/local_class.py). Saved: benchmarks/results/class.json — per class size the
wall time, each student's time to finish and peak memory (server + kernel), whether every lesson
check stayed ✔ or explained, the load average before and after, and the capacity estimates the
capacity table of docs/numbers.md and deploy/jupyterhub/config.yaml's guarantees come from.

    python benchmarks/bench_class.py [--sizes 1 4 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from _provenance import command  # benchmarks/, the script's own folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "jupyterhub"))
sys.path.insert(0, str(ROOT))

import local_class  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "class.json"


def summary(run: dict) -> dict:
    done = [s["finished_s"] for s in run["per_student"] if s["finished_s"] is not None]
    peaks = [s["peak_rss_mib"] for s in run["per_student"] if s["peak_rss_mib"]]
    return {
        "students": run["students"], "wall_s": run["wall_s"], "all_ok": run["all_ok"],
        "finished_s_median": round(statistics.median(done), 1) if done else None,
        "finished_s_max": round(max(done), 1) if done else None,
        "peak_rss_mib_median": round(statistics.median(peaks), 1) if peaks else None,
        "peak_rss_mib_max": round(max(peaks), 1) if peaks else None,
        "load_before": run["load_before"], "load_after": run["load_after"],
        "leftover_processes": len(run["leftover_processes"]),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_class.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8], help="class sizes to run (default 1 4 8)")
    p.add_argument("--timeout", type=float, default=900, help="deadline per class in seconds (default 900)")
    args = p.parse_args(argv)
    runs = []
    for n in args.sizes:
        start = time.time()
        run = local_class.run_class(n, quick=True, timeout_s=args.timeout)
        runs.append(run)
        s = summary(run)
        print(f"{n} students: wall {s['wall_s']} s, finished median {s['finished_s_median']} s / max "
              f"{s['finished_s_max']} s, peak memory median {s['peak_rss_mib_median']} MiB / max "
              f"{s['peak_rss_mib_max']} MiB, lesson checks {'all ✔ or explained' if s['all_ok'] else 'NOT ALL OK'}, "
              f"load {s['load_before'][0]} -> {s['load_after'][0]}, leftover processes {s['leftover_processes']} "
              f"({time.time() - start:.0f} s)", flush=True)
    sums = [summary(r) for r in runs]
    solo = next((s for s in sums if s["students"] == 1), None)
    capacity = {}
    if solo and solo["finished_s_max"]:
        cpus = os.cpu_count() or 1
        # students per core: the largest class whose slowest student took at most 2x the solo time
        fits = [s["students"] for s in sums if s["all_ok"] and s["finished_s_max"] <= 2 * solo["finished_s_max"]]
        peak = max(s["peak_rss_mib_max"] for s in sums if s["peak_rss_mib_max"])
        capacity = {"solo_finished_s": solo["finished_s_max"],
                    "rule": "largest class whose slowest student finished within 2x the solo time",
                    "students_per_core": round(max(fits) / cpus, 2) if fits else None,
                    "peak_rss_mib": peak, "students_per_gib": round(1024 / peak, 2)}
    result = {"what": "local JupyterHub class test: notebooks 01 and 07, quick mode, students at once",
              "command": command(),
              "machine": runs[0]["machine"] if runs else "", "cpus": os.cpu_count(),
              "date": time.strftime("%Y-%m-%d %H:%M"), "classes": sums, "capacity": capacity,
              "runs": runs}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print(f"capacity: {capacity}\nwrote {OUT}")
    return 0 if all(s["all_ok"] and not s["leftover_processes"] for s in sums) else 1


if __name__ == "__main__":
    sys.exit(main())
