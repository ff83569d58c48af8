"""How long the test tiers take from a fresh clone, quiet and beside busy processes.

Usage::

    python benchmarks/bench_test_suite.py [--tier fast|full] [--busy N] [--repeat 1]
    python benchmarks/bench_test_suite.py --reparse     # the saved logs read again, nothing run

Each run clones the committed ``HEAD`` into a temporary folder (``git clone --local``: what CI checks
out, none of this checkout's build outputs) and runs the tier's command there: ``make test-fast`` or
``CI=true bash .ci/run`` (the README's ``make test`` after CI's installs; ``.venv`` is created from
pip's cache, which the time includes).  ``--busy N`` starts N ``python -c 'while 1: pass'`` processes
beside it for the whole run.  The load average is sampled every 5 s.  The numbers are merged into
``benchmarks/results/test_suite.json`` under the tier and the setting, keeping the other entries;
each run's whole log is kept in ``build/test_suite_<tier>_busy<N>.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _provenance import command

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "test_suite.json"
COMMANDS = {"fast": ["make", "test-fast"], "full": ["bash", ".ci/run"]}
# the last line of a run: "=== 3 passed, 1 skipped in 4.20s ===" (with -q, as make test-fast runs: no "=")
SUMMARY = re.compile(r"^(?:=+ )?(\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|warnings?|deselected)\b.*?) "
                     r"in ([\d.]+)s", re.M)
# pytest --durations lines: "12.34s call     tests/browser/test_lab.py::test_x[01]"
DURATION = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(tests/.+?)\s*$", re.M)


def _counts(log: str) -> dict[str, int]:
    """passed/failed/skipped/errors of the last pytest summary line in ``log``."""
    lines = SUMMARY.findall(log)
    if not lines:
        return {}
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", lines[-1][0])}


def _where_time_went(log: str) -> dict:
    """Seconds per test folder (setup + call + teardown of every test over 0.5 s, from pytest's
    ``--durations``) and the ten slowest tests."""
    folders: dict[str, float] = {}
    tests: dict[str, float] = {}
    for secs, _, test in DURATION.findall(log):
        parts = test.split("::")[0].split("/")
        folder = "/".join(parts[:2]) if len(parts) > 2 else parts[0] + "/ (top level)"
        folders[folder] = folders.get(folder, 0.0) + float(secs)
        tests[test] = tests.get(test, 0.0) + float(secs)
    slowest = sorted(tests.items(), key=lambda kv: -kv[1])[:10]
    return {"by_folder_s": {k: round(v, 1) for k, v in sorted(folders.items(), key=lambda kv: -kv[1])},
            "slowest_s": {k: round(v, 1) for k, v in slowest}}


def _from_log(log: str) -> dict:
    """What a run's log says: pytest's own seconds, its workers (pytest-xdist: 1 without), its counts and where
    the time went."""
    workers = re.findall(r"^created: (\d+)/\d+ workers", log, re.M)
    return {"pytest_s": _pytest_seconds(log), "workers": int(workers[-1]) if workers else 1, **_counts(log),
            **_where_time_went(log)}


def _log_path(tier: str, busy: int) -> Path:
    return ROOT / "build" / f"test_suite_{tier}_busy{busy}.log"


def reparse(doc: dict) -> dict:
    """Each setting's last run read again from its saved log (``build/``), by this script's parser."""
    for runs in doc.get("runs", {}).values():
        last = runs[-1]
        path = _log_path(last["tier"], last["busy"])
        if path.exists():
            for key in ("passed", "failed", "skipped", "errors", "error", "xfailed", "xpassed"):
                last.pop(key, None)
            last.update(_from_log(path.read_text()))
    return doc


def _pytest_seconds(log: str) -> float | None:
    lines = SUMMARY.findall(log)
    return float(lines[-1][1]) if lines else None


class LoadSampler:
    def __init__(self, every_s: float = 5.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> "LoadSampler":
        self.samples.append(os.getloadavg()[0])
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def run_once(tier: str, busy: int, timeout_s: float) -> dict:
    work = Path(tempfile.mkdtemp(prefix="d2l-suite-"))
    clone = work / "d2l-async"
    subprocess.run(["git", "clone", "-q", "--local", str(ROOT), str(clone)], check=True)
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(busy)]
    # every test over 0.5 s with its time, so the numbers say where the time went
    env = {**os.environ, "CI": "true", "PYTEST_FLAGS": "--durations=0 --durations-min=0.5"}
    env.pop("VIRTUAL_ENV", None)
    t0 = time.perf_counter()
    try:
        with LoadSampler() as load:
            proc = subprocess.run(COMMANDS[tier], cwd=clone, env=env, capture_output=True, text=True,
                                  timeout=timeout_s)
        rc, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, log = 124, (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    total = time.perf_counter() - t0
    (ROOT / "build").mkdir(exist_ok=True)
    _log_path(tier, busy).write_text(log)
    shutil.rmtree(work, ignore_errors=True)
    samples = load.samples or [float("nan")]
    return {"tier": tier, "command": " ".join(COMMANDS[tier]) if tier == "fast" else "CI=true bash .ci/run",
            "setting": "quiet" if busy == 0 else f"beside {busy} busy processes", "busy": busy, "commit": commit,
            "exit": rc, "total_s": round(total, 1), **_from_log(log),
            "load": {"min": round(min(samples), 2), "mean": round(sum(samples) / len(samples), 2),
                     "max": round(max(samples), 2)}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tier", choices=sorted(COMMANDS), default="fast")
    p.add_argument("--busy", type=int, default=0, help="busy processes beside the run (default 0)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--timeout", type=float, default=5400.0, help="seconds per run (default 5400, CI's 90 min)")
    p.add_argument("--reparse", action="store_true",
                   help="run nothing: read each setting's last run again from its log under build/")
    args = p.parse_args(argv)
    if args.reparse:
        OUT.write_text(json.dumps(reparse(json.loads(OUT.read_text())), indent=2) + "\n")
        return 0
    if args.busy < 0 or args.repeat < 1:
        p.error("--busy must be >= 0 and --repeat >= 1")
    runs = [run_once(args.tier, args.busy, args.timeout) for _ in range(args.repeat)]
    for r in runs:
        print(json.dumps(r))
    doc = json.loads(OUT.read_text()) if OUT.exists() else {}
    if "runs" in doc and not isinstance(doc.get("runs"), dict):  # the older, hand-typed layout
        doc = {}
    doc.setdefault("what", "the test tiers from a fresh clone (git clone --local of HEAD)")
    doc.setdefault("runs", {})
    doc["runs"][f"{args.tier}/{runs[0]['setting']}"] = runs
    doc["machine"] = f"{os.cpu_count()} CPUs; this machine, git clone --local of HEAD"
    doc.setdefault("commands", {})[args.tier] = command()
    OUT.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
