"""What a class costs: simulated students running every notebook on a real local JupyterHub.

Each student starts a server and runs every notebook of ``notebooks/`` (whatever it holds) through
the REST and kernel APIs, in the mode ``deploy/jupyterhub/config.yaml`` sets (its
``singleuser.extraEnv``: quick mode as shipped), with its kernel-culling configuration
(deploy/jupyterhub/local_class.py). Runs, in order:

- one student alone (the reference time of every notebook);
- one student who keeps every notebook's kernel open (JupyterLab's tabs with nothing culling them):
  the memory an open kernel keeps, and what a student holds after opening them all;
- classes of the given sizes, all students at once.

Then the first lecture (deploy/jupyterhub/first_lecture.py): 200 log-ins in five minutes to a real
local hub whose pods are modelled, with config.yaml's spawn settings and with the chart's defaults
(the scenarios run side by side, each on its own hub: they mostly wait).

Saved: benchmarks/results/class.json — per run the wall time, per student the time to finish, the
peak memory (server + kernels), the server alone, the most threads, the temporary folder's peak and
CPU seconds, per notebook its time and its kernel's peak and idle memory, every lesson check, the
load average before and after; the capacity the numbers page and config.yaml's guarantees come
from; the first lecture's scenarios. Everything per node or per 200 students is arithmetic from
these numbers, and docs/numbers.md says so where it shows it.

    python benchmarks/bench_class.py [--sizes 2 4 8] [--no-first-lecture | --reuse-first-lecture]
    python benchmarks/bench_class.py --rerun-lecture 'chart defaults, nodes scaling up'

``--rerun-lecture SCENARIO...`` measures only those first-lecture scenarios again and keeps the
rest of class.json.  ``--reuse-first-lecture`` keeps the first lecture's scenarios of the class.json
already there (each with the date it was measured): they do not depend on the notebooks, only on
config.yaml's spawn settings, which must still be the ones they ran with. For rerunning the classes
after the chapter's notebooks change.
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

import first_lecture  # noqa: E402
import local_class  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "class.json"
#: the rule that turns class runs into students per core
RULE = "largest class whose slowest student finished within 2x the solo time"
#: the first lecture's scenarios: (name, what it stands for, first_lecture keyword arguments); None = config.yaml's
LECTURES = (
    ("shipped", "config.yaml's limits; every pod has room and its image (placeholders, pre-pulled): 15 s",
     {"pod_start_s": 15.0}),
    ("shipped, nodes scaling up", "config.yaml's limits; every pod waits for a new node and the image: 240 s",
     {"pod_start_s": 240.0}),
    ("chart defaults, nodes scaling up", "the chart's concurrentSpawnLimit 64; pods wait 240 s",
     {"pod_start_s": 240.0, "concurrent_spawn_limit": 64}),
    ("chart's failure limit, one slow node", "the chart's consecutiveFailureLimit 5; students 50-54's pods time "
     "out (one slow node); pods otherwise 15 s", {"pod_start_s": 15.0, "consecutive_failure_limit": 5,
                                                   "fail": (50, 51, 52, 53, 54)}),
    ("shipped failure limit, one slow node", "config.yaml's consecutiveFailureLimit; the same five pods time out",
     {"pod_start_s": 15.0, "fail": (50, 51, 52, 53, 54)}),
)


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 1) if xs else None


def summary(run: dict) -> dict:
    """One run's numbers per student and per notebook (medians and maxima over its students)."""
    students = run["per_student"]
    done = [s["finished_s"] for s in students if s["finished_s"] is not None]
    peaks = [s["peak_rss_mib"] for s in students if s["peak_rss_mib"]]
    per_nb = {}
    for stem in run["notebooks"]:
        rows = [s["notebooks"][stem] for s in students if stem in s["notebooks"]]
        secs = [r["seconds"] for r in rows]
        kpeak = [r["kernel_peak_rss_mib"] for r in rows if r.get("kernel_peak_rss_mib")]
        kidle = [r["kernel_idle_rss_mib"] for r in rows if r.get("kernel_idle_rss_mib")]
        per_nb[stem] = {"seconds_median": _median(secs), "seconds_max": max(secs) if secs else None,
                        "kernel_peak_rss_mib_max": max(kpeak) if kpeak else None,
                        "kernel_idle_rss_mib_max": max(kidle) if kidle else None,
                        "threads_max": max((r.get("kernel_threads_max") or 0 for r in rows), default=None),
                        "cell_errors": sum(r["cell_errors"] for r in rows)}
    return {
        "students": run["students"], "mode": run["mode"], "keep_kernels": run["keep_kernels"],
        "notebooks": len(run["notebooks"]), "wall_s": run["wall_s"], "all_ok": run["all_ok"],
        "errors": [s["error"] for s in students if s["error"]],
        "finished_s_median": _median(done), "finished_s_max": round(max(done), 1) if done else None,
        "peak_rss_mib_median": _median(peaks), "peak_rss_mib_max": round(max(peaks), 1) if peaks else None,
        "server_rss_mib_max": max((s["server_rss_mib"] for s in students), default=None),
        "threads_max": max((s["threads_max"] for s in students), default=None),
        "tmp_peak_mib_max": max((s["tmp_peak_mib"] for s in students), default=None),
        "cpu_s_median": _median([s["cpu_s"] for s in students if s["cpu_s"]]),
        "reconnects": run["reconnects"],
        "load_before": run["load_before"], "load_after": run["load_after"],
        "leftover_processes": len(run["leftover_processes"]), "per_notebook": per_nb,
    }


def capacity(sums: list[dict]) -> dict:
    """Students per core (:data:`RULE`), the peak memory per student and per kernel, from the class runs."""
    plain = [s for s in sums if not s["keep_kernels"]]
    solo = next((s for s in plain if s["students"] == 1), None)
    if not solo or not solo["finished_s_max"]:
        return {}
    cpus = os.cpu_count() or 1
    fits = [s["students"] for s in plain if s["all_ok"] and s["finished_s_max"] <= 2 * solo["finished_s_max"]]
    peak = max(s["peak_rss_mib_max"] for s in plain if s["peak_rss_mib_max"])
    kernels = {stem: max(s["per_notebook"][stem]["kernel_peak_rss_mib_max"] or 0 for s in plain
                         if stem in s["per_notebook"]) for stem in solo["per_notebook"]}
    heaviest = max(kernels, key=kernels.get)
    keep = next((s for s in sums if s["keep_kernels"]), None)
    return {"solo_finished_s": solo["finished_s_max"], "rule": RULE, "mode": solo["mode"],
            "students_per_core": round(max(fits) / cpus, 2) if fits else None,
            "peak_rss_mib": peak, "students_per_gib": round(1024 / peak, 2),
            "server_rss_mib": max(s["server_rss_mib_max"] for s in plain),
            "kernel_peak_rss_mib": kernels, "heaviest_notebook": heaviest,
            "threads_max": max(s["threads_max"] for s in sums), "tmp_peak_mib": max(s["tmp_peak_mib_max"] for s in sums),
            "all_kernels_open_peak_rss_mib": keep["peak_rss_mib_max"] if keep else None}


def previous_lectures(path: Path = OUT) -> list[dict]:
    """The first lecture's scenarios of ``path``, each with the date it was measured.

    Raises ``ValueError`` when there are none, or when a scenario that ran with config.yaml's spawn
    settings ran with other values than config.yaml has now (then they must be measured again).

    Returns:
        The scenarios as saved, in :data:`LECTURES`' order.
    """
    old = json.loads(path.read_text()) if path.is_file() else {}
    saved = {r["name"]: r for r in old.get("first_lecture") or []}
    missing = [name for name, _, _ in LECTURES if name not in saved]
    if missing:
        raise ValueError(f"--reuse-first-lecture: {path} has no first-lecture scenario {missing}; run without it")
    shipped = first_lecture._hub_config_values()
    keys = ("concurrent_spawn_limit", "consecutive_failure_limit", "start_timeout")
    rows = []
    for name, _, kwargs in LECTURES:
        row = dict(saved[name])
        changed = [k for k in keys if k not in kwargs and row.get(k) != shipped[k]]
        if changed:
            raise ValueError(f"--reuse-first-lecture: scenario {name!r} ran with {[(k, row.get(k)) for k in changed]}, "
                             f"config.yaml now has {[(k, shipped[k]) for k in changed]}; run without it")
        row.setdefault("measured", old.get("date", "?"))
        rows.append(row)
    return rows


def _lecture(scenario: tuple) -> dict:
    """One first-lecture scenario of :data:`LECTURES`, measured now."""
    name, what, kwargs = scenario
    return {"name": name, "what": what, "measured": time.strftime("%Y-%m-%d %H:%M"), "command": command(),
            **first_lecture.first_lecture(200, arrive_s=300.0, **kwargs)}


def _print_lecture(r: dict) -> None:
    print(f"first lecture, {r['name']}: {r['ready']} of 200 ready, median {r['ready_s_median']} s / "
          f"p95 {r['ready_s_p95']} s after arriving; {r['throttled_students']} told 429; hub "
          f"{'EXITED at ' + str(r['hub_exited_at_s']) + ' s' if r['hub_exited_at_s'] else 'up'}; "
          f"hub peak {r['hub_peak_rss_mib']} MiB, {r['hub_cpu_s']} CPU s", flush=True)


def _measure_lectures(scenarios: list[tuple]) -> list[dict]:
    """The scenarios measured side by side (each its own hub; they mostly wait), each printed."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(scenarios)) as pool:
        rows = list(pool.map(_lecture, scenarios))
    for r in rows:
        _print_lecture(r)
    return rows


def rerun_lectures(names: list[str], path: Path = OUT) -> int:
    """Measure the named first-lecture scenarios again, side by side, and put them in ``path`` in place
    of the old ones (each row says when and by which command it was measured); the classes and the
    other scenarios stay as they were."""
    if not path.is_file():
        raise SystemExit(f"--rerun-lecture: {path} does not exist; run without it first")
    data = json.loads(path.read_text())
    fresh = {r["name"]: r for r in _measure_lectures([sc for sc in LECTURES if sc[0] in names])}
    old = {r["name"]: r for r in data.get("first_lecture") or []}
    data["first_lecture"] = [fresh.get(n) or old[n] for n, _, _ in LECTURES if n in fresh or n in old]
    path.write_text(json.dumps(data, indent=2))
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_class.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8],
                   help="class sizes after the student alone (default 2 4 8)")
    p.add_argument("--timeout", type=float, default=3600, help="deadline per class in seconds (default 3600)")
    p.add_argument("--no-keep", action="store_true", help="skip the student who keeps every kernel open")
    lecture = p.add_mutually_exclusive_group()
    lecture.add_argument("--no-first-lecture", action="store_true", help="skip the 200 modelled log-ins")
    lecture.add_argument("--reuse-first-lecture", action="store_true",
                         help="keep the first lecture's scenarios of the class.json already there")
    lecture.add_argument("--rerun-lecture", metavar="SCENARIO", nargs="+", choices=[n for n, _, _ in LECTURES],
                         help="measure only these first-lecture scenarios again; keep everything else of class.json")
    args = p.parse_args(argv)
    if args.rerun_lecture:
        return rerun_lectures(args.rerun_lecture)
    reused = previous_lectures() if args.reuse_first_lecture else []
    plan = [(1, False)] + ([] if args.no_keep else [(1, True)]) + [(n, False) for n in args.sizes if n != 1]
    runs = []
    for n, keep in plan:
        start = time.time()
        run = local_class.run_class(n, keep_kernels=keep, timeout_s=args.timeout)
        runs.append(run)
        s = summary(run)
        print(f"{n} student{'s' * (n > 1)}{' keeping every kernel open' if keep else ''} ({s['mode']} mode, "
              f"{s['notebooks']} notebooks): finished median {s['finished_s_median']} s / max {s['finished_s_max']} s, "
              f"peak memory median {s['peak_rss_mib_median']} / max {s['peak_rss_mib_max']} MiB, threads "
              f"{s['threads_max']}, lesson checks {'all ✔ or explained' if s['all_ok'] else 'NOT ALL OK'}, "
              f"load {s['load_before'][0]} -> {s['load_after'][0]}, leftover processes {s['leftover_processes']} "
              f"({time.time() - start:.0f} s)", flush=True)
    sums = [summary(r) for r in runs]
    cap = capacity(sums)
    lectures = reused
    if not (args.no_first_lecture or args.reuse_first_lecture):
        lectures = _measure_lectures(list(LECTURES))
    result = {"what": f"local JupyterHub class test: every notebook, {sums[0]['mode'] if sums else '?'} mode "
                      "(config.yaml's), students at once",
              "command": command(),
              "machine": runs[0]["machine"] if runs else "", "cpus": os.cpu_count(),
              "date": time.strftime("%Y-%m-%d %H:%M"), "classes": sums, "capacity": cap,
              "first_lecture": lectures, "runs": runs}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print(f"capacity: {json.dumps(cap)}\nwrote {OUT}")
    return 0 if all(s["all_ok"] and not s["leftover_processes"] for s in sums) else 1


if __name__ == "__main__":
    sys.exit(main())
