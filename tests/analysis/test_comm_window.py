"""comm_overlap's window: the whole file by default, HTA's window on request,
with HTA 0.5.0's get_comm_comp_overlap as the oracle."""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from d2l_async.analysis import comm_overlap
from d2l_async.trace import hta_window_mask, last_step_starts, rank_lanes, read_chrome_trace, read_trace_dir

PUBLIC = Path(__file__).parents[1] / "trace" / "data" / "public"
SAMPLES = Path(__file__).parents[2] / "d2l_async" / "data"
A100 = PUBLIC / "a100_rank3_of_8.json.gz"
PAIR = PUBLIC / "hta_sampled_pair"
#: every GPU trace the tests carry, as HTA reads it (a folder of rank files)
EVERY = {**{p.name.removesuffix(".json.gz"): p for p in sorted(PUBLIC.glob("*.json.gz"))},
         **{p.name.removesuffix(".json.gz"): p for p in sorted(SAMPLES.glob("*.json.gz"))
            if p.name != "cpu_only.json.gz"},
         "hta_sampled_pair": PAIR}


def hta_pctg(folder: Path, include: bool) -> list[float]:
    hta = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis (the oracle) is not installed")
    logging.getLogger("hta").setLevel(logging.ERROR)
    ta = hta.TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=include)
    return ta.get_comm_comp_overlap(visualize=False).sort_values("rank")["comp_comm_overlap_pctg"].tolist()


@pytest.mark.slow  # runs HTA itself on the trace (the oracle): make test
@pytest.mark.parametrize("case", ["a100 rank 3", "sampled pair"])
def test_hta_window_gives_htas_overlap_and_the_file_htas_whole_file_overlap(tmp_path, case):
    if case == "a100 rank 3":
        shutil.copy(A100, tmp_path)
        folder, trace = tmp_path, read_chrome_trace(A100)
    else:
        folder, trace = PAIR, read_trace_dir(PAIR)
    ours_hta = [round(100 * r.hidden_fraction, 2) for r in comm_overlap(trace, window="hta")]
    ours_file = [round(100 * r.hidden_fraction, 2) for r in comm_overlap(trace)]
    assert ours_hta == hta_pctg(folder, include=False)
    assert ours_file == hta_pctg(folder, include=True)
    assert ours_hta != ours_file  # the window matters on these traces


def as_hta_reads(tmp_path: Path, src: Path) -> tuple[Path, object]:
    if src.is_dir():
        return src, read_trace_dir(src)
    shutil.copy(src, tmp_path)
    return tmp_path, read_chrome_trace(src)


@pytest.mark.slow  # runs HTA itself on every trace (the oracle): make test
@pytest.mark.parametrize("name", sorted(EVERY))
def test_the_hta_window_gives_htas_overlap_on_every_trace_here(tmp_path, name):
    """Where HTA finds communication kernels, its percentage to two decimals; where it finds none
    (NaN: 0 / 0), no device lane here carries communication either (HTA does not look at gloo's
    CPU collectives, which MTIA's trace holds)."""
    folder, trace = as_hta_reads(tmp_path, EVERY[name])
    theirs = hta_pctg(folder, include=False)
    ours = comm_overlap(trace, window="hta")
    assert len(ours) == len(theirs)
    for r, rl, pct in zip(ours, rank_lanes(trace), theirs):
        if math.isnan(pct):
            assert not [l for l in rl.communication if trace.lane(l).device != "cpu"]
        else:
            assert round(100 * r.hidden_fraction, 2) == pct


def rocm_like_trace(path: Path) -> Path:
    """Two profiler steps; a GEMM launched in each; NCCL kernels that carry no correlation id (no
    known launch), one in each step: HTA keeps the first, as it keeps a CPU row that starts before
    the last step."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1,
           "ts": 100 * k, "dur": 100} for k in (0, 1)]
    for corr, (launch, start, end) in enumerate([(10, 20, 60), (110, 120, 160)], start=1):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1,
                   "ts": launch, "dur": 2, "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": "Cijk_gemm", "pid": 0, "tid": 7, "ts": start,
                   "dur": end - start, "args": {"correlation": corr, "stream": 7, "device": 0}})
    for start in (30, 130):
        ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic", "pid": 0, "tid": 20, "ts": start,
                   "dur": 50, "args": {"stream": 20, "device": 0}})
    path.write_text(json.dumps({"traceEvents": ev, "distributedInfo": {"rank": 0}}))
    return path


def test_device_work_without_a_known_launch_is_in_the_window_when_it_starts_before_the_last_step(tmp_path):
    t = read_chrome_trace(rocm_like_trace(tmp_path / "rank0.json"))
    keep = hta_window_mask(t)
    nccl = t["name"] == "ncclDevKernel_Generic"
    assert np.isnan(t["issue"][nccl]).all()
    assert keep[nccl].tolist() == [True, False]
    (r,) = comm_overlap(t, window="hta")
    assert (r.collectives, r.comm_s, r.hidden_s) == (1, pytest.approx(50e-6), pytest.approx(30e-6))
    assert hta_pctg(tmp_path, include=False) == [round(100 * r.hidden_fraction, 2)] == [60.0]


def test_the_window_leaves_out_work_launched_in_the_last_step():
    t = read_chrome_trace(A100)
    last = last_step_starts(t)[-1]
    keep = hta_window_mask(t)
    device = np.isin(t["lane"], [l.name for l in t.backend_lanes])
    assert not (keep & device & ~(t["issue"] < last)).any()
    assert (keep[device] == (t["issue"][device] < last)).all()
    front = ~device
    assert (keep[front] == (t["start"][front] < last)).all()


def test_a_trace_with_one_step_is_kept_whole():
    t = read_chrome_trace(PUBLIC / "triton_example.json.gz")
    assert len(last_step_starts(t)) == 0 and hta_window_mask(t).all()


def test_an_unknown_window_is_a_clear_error():
    with pytest.raises(ValueError, match=r"window must be one of \('file', 'hta'\), got 'steps'"):
        comm_overlap(read_chrome_trace(A100), window="steps")
