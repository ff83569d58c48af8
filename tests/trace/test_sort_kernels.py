"""The trace layer's numbers do not depend on the SIMD sort kernel numpy picks for the CPU.

numpy's default (unstable) sort dispatches to AVX-512 code (x86-simd-sort, ``X86_V4``), to AVX2 code
(``X86_V3``) or to its own baseline code, and each leaves equal keys in a different order.  HTA 0.5.0
sorts with it, so its queue ``max`` and ``mean`` move with the CPU where launches and starts share a
microsecond; ours must not.  Each kernel this CPU has is forced in a subprocess by switching the
others off (``NPY_DISABLE_CPU_FEATURES``, read when numpy is imported), and there

* the HTA oracle tests run (recorded numbers and HTA live, ``test_hta_oracle.py``), and
* a probe prints the kernel's order of equal keys, our queue numbers on traces full of ties, and
  HTA's own numbers on one of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
TIMEOUT_S = 600

PROBE = r"""
import json, logging, sys, tempfile, warnings
from pathlib import Path
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
import numpy as np
from numpy._core._multiarray_umath import __cpu_features__ as features
from tests.trace.generated_traces import write_case
from d2l_async.analysis import queue_length_summary
from d2l_async.data import load_sample
from d2l_async.trace import read_trace_dir

keys = np.random.default_rng(0).integers(0, 40, 4000)
out = {"features": {k: bool(v) for k, v in features.items() if k.startswith("X86_V")},
       "order": np.argsort(keys).tolist()}
folder = write_case("tie_ranks", Path(tempfile.mkdtemp()) / "tie_ranks")
traces = {"tie_ranks": read_trace_dir(folder), "a100_nccl_step": load_sample("a100_nccl_step"),
          "a100_simple_add": load_sample("a100_simple_add")}
out["ours"] = {name: {r["lane"]: [int(r["count"]), int(r["max"]), float(r["mean"]), int(r.get("hta_ties", -1))]
                      for _, r in queue_length_summary(t).iterrows()} for name, t in traces.items()}
try:
    from hta.trace_analysis import TraceAnalysis
except ImportError:
    out["hta"] = None
else:
    ta = TraceAnalysis(trace_dir=str(folder))
    s = ta.get_queue_length_summary(ranks=sorted(ta.t.traces)).droplevel(0, axis=1).reset_index()
    out["hta"] = {f"{int(r['rank'])}/{int(r['stream'])}": [int(r["count"]), int(r["max"]), float(r["mean"])]
                  for _, r in s.iterrows()}
print(json.dumps(out))
"""


def sort_kernels() -> dict[str, str]:
    """Kernel -> the ``NPY_DISABLE_CPU_FEATURES`` value that leaves it the best numpy can use here:
    x86's ``X86_V4`` (AVX-512), ``X86_V3`` (AVX2) and the baseline, those this CPU and numpy have
    (features this process was started without count as the CPU's: the suite may itself run forced)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    off = os.environ.get("NPY_DISABLE_CPU_FEATURES", "").replace(",", " ").split()
    dispatch = [f for f in __cpu_dispatch__ if __cpu_features__.get(f) or f in off]
    out = {"baseline": " ".join(dispatch)}
    if "X86_V3" in dispatch:
        out["X86_V3 (AVX2)"] = " ".join(f for f in dispatch if f != "X86_V3")
    if "X86_V4" in dispatch:
        out["X86_V4 (AVX-512)"] = " ".join(f for f in dispatch if f not in ("X86_V3", "X86_V4"))
    return out


def kernel_in_use() -> str:
    from numpy._core._multiarray_umath import __cpu_features__

    return ("X86_V4 (AVX-512)" if __cpu_features__.get("X86_V4") else
            "X86_V3 (AVX2)" if __cpu_features__.get("X86_V3") else "baseline")


def run(code_or_args: list[str], disable: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disable, "PYTHONPATH": str(ROOT)}
    env.pop("D2L_ASYNC_TIER", None)
    return subprocess.run([sys.executable, *code_or_args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def probes() -> dict[str, dict]:
    out = {}
    for kernel, disable in sort_kernels().items():
        p = run(["-c", PROBE], disable)
        assert p.returncode == 0, p.stderr[-3000:]
        out[kernel] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.slow  # three subprocesses that each read traces and run HTA: make test
def test_each_forced_kernel_is_in_use_and_orders_equal_keys_its_own_way(probes):
    kernels = sort_kernels()
    assert len(probes) == len(kernels)
    if "X86_V3 (AVX2)" in probes:
        assert probes["X86_V3 (AVX2)"]["features"] == {"X86_V2": True, "X86_V3": True, "X86_V4": False}
        assert probes["baseline"]["features"]["X86_V3"] is False
    orders = [tuple(p["order"]) for p in probes.values()]
    assert len(set(orders)) == len(orders)  # the kernels really differ: the test can see a tie rule fail


@pytest.mark.slow
def test_our_queue_numbers_are_the_same_under_every_kernel(probes):
    ours = [p["ours"] for p in probes.values()]
    assert all(o == ours[0] for o in ours[1:])
    assert sum(f[3] for f in ours[0]["tie_ranks"].values()) > 0  # the traces do hold ties


@pytest.mark.slow
def test_htas_numbers_move_with_the_kernel_only_on_tied_lanes(probes):
    """The reason for the parity rule: HTA's count never moves, its max and mean move only where a
    lane has ties (and do move on this generated job when several kernels exist)."""
    hta = {k: p["hta"] for k, p in probes.items()}
    if any(v is None for v in hta.values()):
        pytest.skip("HolisticTraceAnalysis (the oracle) is not installed")
    ours = next(iter(probes.values()))["ours"]["tie_ranks"]  # lanes "rank R · cuda:0 stream 7"
    ties = {lane.split(" · ")[0].removeprefix("rank ") + "/7": f[3] for lane, f in ours.items()}
    first = next(iter(hta.values()))
    moved = {lane for h in hta.values() for lane in h if h[lane] != first[lane]}
    assert set(first) == set(ties)
    assert all(h[lane][0] == first[lane][0] for h in hta.values() for lane in h)  # count
    assert all(ties[lane] > 0 for lane in moved)
    if len(hta) > 1:
        assert moved


def forced() -> list[str]:
    """The kernels this process does not use (the suite runs the oracle tests with its own)."""
    return [k for k in sort_kernels() if k != kernel_in_use()]


@pytest.mark.slow
@pytest.mark.parametrize("kernel", forced())
def test_the_hta_oracle_tests_pass_under_the_kernel(kernel):
    p = run(["-m", "pytest", "tests/trace/test_hta_oracle.py", "-q", "-p", "no:cacheprovider",
             "-W", "ignore"], sort_kernels()[kernel])
    assert p.returncode == 0, p.stdout[-3000:]
    assert " passed" in p.stdout and " failed" not in p.stdout


def test_every_sort_that_orders_events_is_stable():
    """The rule in code: in the trace layer and the analyses, ``argsort`` and ``sort_values`` say
    ``kind="stable"`` (``lexsort`` is stable; ``np.unique``, ``isin`` and ``sorted`` of distinct
    values order no events)."""
    import ast

    unstable = []
    for folder in ("trace", "analysis"):
        for path in sorted((ROOT / "d2l_async" / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("argsort", "sort", "sort_values")):
                    kind = {k.arg: k.value for k in node.keywords}.get("kind")
                    if not (isinstance(kind, ast.Constant) and kind.value == "stable"):
                        unstable.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert unstable == []
