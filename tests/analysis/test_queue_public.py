"""Queue length against HTA 0.5.0 on the public traces of other generations and accelerators.

The reference numbers are HTA 0.5.0's ``get_queue_length_summary(ranks=[rank])`` with its defaults
(``../shared/traces/README.md``); the smaller files are also run through HTA itself here, step by
step.  The traces are committed under ``tests/trace/data/public`` with their licences.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from d2l_async.analysis import queue_length_series, queue_length_summary
from d2l_async.trace import merge_ranks, read_chrome_trace

from ..trace.hta_parity import assert_agrees, assert_same_step_function, hta_summary_rows, our_lanes

PUBLIC = Path(__file__).parents[1] / "trace" / "data" / "public"

# HTA 0.5.0 defaults: file -> {stream: (count, max)}
HTA_DEFAULT = {
    "a100_rank3_of_8": {7: (14940, 287), 20: (470, 10), 21: (100, 2), 22: (240, 22)},
    "backward_thread": {7: (2, 1)},
    "kineto2021_resnet50_workers4": {7: (15430, 488)},
    "mtia_single_rank": {1: (6900, 1), 102: (6, 1)},
    "rocm62_mi250_minitoy": {0: (32, 1)},
    "triton_example": {7: (2, 1)},
}
# multi-step traces HTA trims by default: run HTA itself on them (mtia's 455k events take ~30 s in
# HTA; its numbers above are HTA's)
LIVE = ["a100_rank3_of_8", "kineto2021_resnet50_workers4", "rocm62_mi250_minitoy", "backward_thread",
        "triton_example"]


def load(name: str):
    return read_chrome_trace(PUBLIC / f"{name}.json.gz")


@pytest.mark.parametrize("name", sorted(HTA_DEFAULT))
def test_count_and_max_per_stream_equal_htas_reference(name):
    ours = queue_length_summary(load(name))
    gpu = ours[~ours["device"].eq("cpu")]
    assert sorted(gpu["stream"]) == sorted(HTA_DEFAULT[name])
    for stream, (count, qmax) in HTA_DEFAULT[name].items():
        r = gpu[gpu["stream"] == stream].iloc[0]
        assert (r["count"], r["max"]) == (count, qmax), (name, stream)


@pytest.fixture(scope="module")
def hta_runs(tmp_path_factory):
    hta = pytest.importorskip("hta.trace_analysis", reason="holistictraceanalysis is not installed")
    logging.getLogger("hta").setLevel(logging.ERROR)
    out = {}
    for name in LIVE:
        d = tmp_path_factory.mktemp(name)
        shutil.copy(PUBLIC / f"{name}.json.gz", d)
        for include in (False, True):
            ta = hta.TraceAnalysis(trace_dir=str(d), include_last_profiler_step=include)
            rank = next(iter(ta.t.traces))
            out[name, include] = (hta_summary_rows(ta, [rank]), ta.get_queue_length_time_series(ranks=[rank]))
    return out


@pytest.mark.slow  # runs HTA itself on the trace (the oracle): make test
@pytest.mark.parametrize("include", [False, True])
@pytest.mark.parametrize("name", LIVE)
def test_summary_and_step_function_agree_with_hta(hta_runs, name, include):
    rows, series = hta_runs[name, include]
    ours = our_lanes(load(name), include)
    assert_agrees(ours, rows)
    assert_same_step_function(ours, series)


def test_including_the_last_step_changes_the_2021_numbers():
    t = load("kineto2021_resnet50_workers4")
    whole = queue_length_summary(t, include_last_profiler_step=True).iloc[0]
    assert (whole["count"], whole["max"]) == (18516, 522)  # HTA 0.5.0, include_last_profiler_step=True


def test_equal_timestamps_a_launch_first_and_htas_step_function(tmp_path):
    """A launch and a GPU op on the same instant: a launch first here, on every machine; HTA's order
    there is its sort kernel's, but the queue after each instant is the same."""
    hta = pytest.importorskip("hta.trace_analysis")
    logging.getLogger("hta").setLevel(logging.ERROR)
    ev = []
    for i, (launch_ts, start_ts) in enumerate([(0, 10), (10, 12), (12, 20), (20, 20.5), (21, 30)]):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": launch_ts, "dur": 0.5, "args": {"correlation": 100 + i}})
        ev.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": start_ts, "dur": 1,
                   "args": {"correlation": 100 + i, "stream": 7, "device": 0}})
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": ev, "distributedInfo": {"rank": 0}}))
    trace = read_chrome_trace(tmp_path / "t.json")
    # launches at 0, 10, 12, 20, 21; starts at 10, 12, 20, 20.5, 30: +1 before -1 at 10, 12 and 20
    assert queue_length_series(trace)["queue_length"].tolist() == [1, 2, 1, 2, 1, 2, 1, 0, 1, 0]
    ta = hta.TraceAnalysis(trace_dir=str(tmp_path))
    assert_same_step_function(our_lanes(trace, False), ta.get_queue_length_time_series(ranks=[0]))


def test_merged_ranks_are_trimmed_each_by_its_own_last_step():
    t = load("a100_rank3_of_8")
    merged = merge_ranks({3: t, 5: t})
    single = queue_length_summary(t)
    both = queue_length_summary(merged)
    assert len(both) == 2 * len(single)
    for r in (3, 5):
        part = both[both["lane"].str.startswith(f"rank {r} · ")].reset_index(drop=True)
        pd.testing.assert_series_equal(part["count"], single["count"], check_names=False)
        pd.testing.assert_series_equal(part["max"], single["max"], check_names=False)
    assert not np.array_equal(queue_length_summary(merged, include_last_profiler_step=True)["count"],
                              both["count"])
