"""Every notebook as a Binder reader runs it: default mode, one CPU, shared with a busy process.

For each notebook the script executes it with nbclient pinned to one CPU beside a process spinning on
the same CPU (``tests/one_core/pinned.py``: the kernel inherits the affinity), in default mode (no
``D2L_ASYNC_QUICK``), and records the wall time (kernel start to last cell), the kernel's peak RSS
(``ru_maxrss`` read inside it by a last cell appended in memory) and its finished children's peak,
and every lesson check with its result, and what the executed notebook asks of a reader
(``tests/one_core/reading.py``: reading minutes, printed words, check lines and check words).  Goal: each
notebook <= 90 s and <= 1 GiB (a Binder pod has 2 GB; a second kernel may be open beside it), held by
``tests/test_binder_sized.py``, which reads this file.

Run: ``.venv/bin/python benchmarks/bench_notebooks.py [--quick] [--no-busy] [--only 03_barriers]``;
writes ``benchmarks/results/notebooks.json`` (``notebooks_quick.json`` with ``--quick``).
Notebooks run one after another: two at once would measure each other.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from _provenance import command  # benchmarks/, the script's own folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.one_core import reading  # noqa: E402
from tests.one_core.pinned import NOTEBOOKS, run_pinned  # noqa: E402

GOAL_S = 90.0
GOAL_RSS = 1 << 30


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="quick mode (as in make test) instead of default mode")
    ap.add_argument("--no-busy", action="store_true", help="pinned, but without the busy neighbour")
    ap.add_argument("--only", action="append", default=[], help="notebook name prefix (repeatable)")
    ap.add_argument("--timeout", type=int, default=900, help="per-cell timeout in seconds")
    args = ap.parse_args()
    from d2l_async.devices import machine

    paths = [p for p in NOTEBOOKS if not args.only or any(p.stem.startswith(o) for o in args.only)]
    if not paths:
        print(f"no notebook matches {args.only}", file=sys.stderr)
        return 2
    before = machine()
    rows = []
    for path in paths:
        load0 = os.getloadavg()[0]
        run = run_pinned(path, quick=args.quick, busy=not args.no_busy, timeout=args.timeout)
        ok = not run.error and run.seconds <= GOAL_S and run.peak_rss_bytes <= GOAL_RSS
        s = reading.stats(path, run.notebook)
        rows.append({
            "notebook": run.name, "seconds": round(run.seconds, 2), "peak_rss_mib": round(run.peak_rss_bytes / 2**20),
            "children_peak_rss_mib": round(run.children_peak_rss_bytes / 2**20), "error": run.error[-500:],
            "within_goal": ok, "checks": [c.to_dict() for c in run.checks],
            "held": sum(c.holds is True for c in run.checks),
            "failed_explained": sum(c.holds is False and c.explained for c in run.checks),
            "cant_tell": sum(c.holds is None for c in run.checks),
            "unexplained": len(run.unexplained), "kernel_affinity": list(run.affinity),
            "load_avg_before": round(load0, 2), "load_avg_after": [round(x, 2) for x in os.getloadavg()],
            "reading_minutes": round(s.minutes, 1), "markdown_words": s.markdown_words,
            "printed_words": s.printed_words, "code_lines": s.code_lines, "plumbing_lines": s.plumbing_lines,
            "concepts": len(s.concepts), "check_lines": s.check_lines, "check_words": s.check_words,
        })
        r = rows[-1]
        print(f"{run.name:32s} {run.seconds:6.1f} s  {r['peak_rss_mib']:5d} MiB  checks {r['held']}✔ "
              f"{r['failed_explained']}✘ {r['cant_tell']}? load {r['load_avg_after'][0]:.1f} "
              f"{'ERROR ' + run.error.splitlines()[0][:80] if run.error else ''}", flush=True)
        for c in run.checks:
            print("     ", c.text[:160])
    out = {
        "what": "each notebook executed with nbclient, pinned to one CPU"
                + ("" if args.no_busy else " beside a busy process on the same CPU"),
        "command": command(), "mode": "quick" if args.quick else "default", "busy": not args.no_busy,
        "goal": {"seconds": GOAL_S, "peak_rss_bytes": GOAL_RSS},
        "machine": before.describe(), "python": platform.python_version(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "notebooks": rows,
    }
    name = "notebooks_quick.json" if args.quick else "notebooks.json"
    if args.only:  # a partial rerun keeps the other notebooks' rows of the last full run
        name = name.replace(".json", "_partial.json")
    dest = ROOT / "benchmarks" / "results" / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"\nwrote {dest.relative_to(ROOT)}; within the goal (<= {GOAL_S:.0f} s, <= 1 GiB, no error): "
          f"{sum(r['within_goal'] for r in rows)} of {len(rows)}")
    return 0 if all(r["within_goal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
