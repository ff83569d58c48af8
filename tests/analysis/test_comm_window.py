"""comm_overlap's window: the whole file by default, HTA's window on request,
with HTA 0.5.0's get_comm_comp_overlap as the oracle."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from d2l_async.analysis import comm_overlap
from d2l_async.trace import hta_window_mask, last_step_starts, read_chrome_trace, read_trace_dir

PUBLIC = Path(__file__).parents[1] / "trace" / "data" / "public"
A100 = PUBLIC / "a100_rank3_of_8.json.gz"
PAIR = PUBLIC / "hta_sampled_pair"


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
