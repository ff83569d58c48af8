"""Running a peer-suite runner (``opinfo_runner``, ``optim_runner``, ``module_runner``) in a
subprocess: a crash fails the test with the name of the case that was running."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .helpers import ROOT


def run_chunk(runner: str, *args: str, timeout: float = 900) -> list[dict]:
    """``python -m tests.torch_async.RUNNER ARGS``: its JSON lines (one per case)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-m", f"tests.torch_async.{runner}", *args], capture_output=True,
                         text=True, timeout=timeout, env=env, cwd=ROOT)
    results, running = [], None
    for line in out.stdout.splitlines():
        if line.startswith("start "):
            running = line.split(" ", 1)[1]
        elif line.startswith("{"):
            results.append(json.loads(line))
            running = None
    if out.returncode != 0 or running is not None:
        pytest.fail(f"{runner} crashed (exit {out.returncode}) while checking {running!r}:\n{out.stderr[-3000:]}")
    return results


def differing(results: list[dict], known: dict, key: str) -> list[dict]:
    """The results that differ from eager and are not listed in ``known`` (by ``key``)."""
    return [r for r in results if r["status"] == "differs" and r[key] not in known]
