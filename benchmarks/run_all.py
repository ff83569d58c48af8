"""`make benchmarks`: run every benchmark script in this folder, one after another.

Each script prints its numbers and saves them as JSON under benchmarks/results/. They run one at a
time on purpose: two benchmarks sharing a 2-core machine would measure each other.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


def scripts() -> list[Path]:
    """The benchmark scripts ``make benchmarks`` runs, in order (``tests/test_benchmarks_run.py`` checks each starts)."""
    return sorted(HERE.glob("bench_*.py"))


def main() -> int:
    failed = []
    for script in scripts():
        print(f"\n=== {script.name} ===", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(script)])
        print(f"=== {script.name}: exit {rc}, {time.perf_counter() - t0:.1f} s ===", flush=True)
        if rc:
            failed.append(script.name)
    if failed:
        print("failed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
