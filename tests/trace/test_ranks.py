"""Several ranks in one trace: read_trace_dir (HTA's trace_dir) and merge_ranks."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from d2l_async.trace import (Event, Lane, LaneRole, Trace, TraceError, merge_ranks, rank_lanes,
                             read_chrome_trace, read_trace_dir, write_chrome_trace)

PAIR = Path(__file__).parent / "data" / "gloo_pair"


def raw(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def small(lane_names=("frontend", "dev"), flow=(5, 5), deps=((), (0,)), source="engine", **meta) -> Trace:
    events = [Event(lane_names[0], "launch", "launch a", 0.0, 0.1, flow=flow[0], deps=deps[0]),
              Event(lane_names[1], "kernel", "a", 0.2, 0.5, issue=0.0, flow=flow[1], deps=deps[1])]
    lanes = [Lane(lane_names[0], LaneRole.FRONTEND), Lane(lane_names[1], LaneRole.BACKEND, device="cuda:0")]
    return Trace.from_events(events, lanes, meta={"source": source, **meta})


def test_gloo_pair_has_one_lane_group_per_rank_in_rank_order():
    t = read_trace_dir(PAIR)
    assert t.ranks == (0, 1)
    groups = [l.group for l in t.lanes]
    assert groups == sorted(groups) and set(groups) == {"rank 0", "rank 1"}
    for lane in t.lanes:
        assert lane.name.startswith(f"rank {lane.rank} · ") and lane.group == f"rank {lane.rank}"
    # within a rank the frontend (the Python thread) comes first
    for r in (0, 1):
        mine = [l for l in t.lanes if l.rank == r]
        assert mine[0].is_frontend and "(python)" in mine[0].name
    # every event of each file is there, on its rank's lanes
    for r in (0, 1):
        alone = read_chrome_trace(PAIR / f"rank{r}.json.gz")
        on_rank = np.char.startswith(t["lane"].astype(str), f"rank {r} · ")
        assert on_rank.sum() == len(alone)
        assert sorted(t["name"][on_rank]) == sorted(alone["name"])


def test_gloo_pair_ranks_share_the_profiler_clock():
    t = read_trace_dir(PAIR)
    assert t.meta["clock"] == "profiler"
    firsts = {}
    for r in (0, 1):
        doc = raw(PAIR / f"rank{r}.json.gz")
        ts = [e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
        firsts[r] = doc["baseTimeNanoseconds"] / 1e3 + min(ts)  # µs on the host's clock
    expected = (firsts[1] - firsts[0]) / 1e6
    starts = {r: t["start"][np.char.startswith(t["lane"].astype(str), f"rank {r} · ")].min() for r in (0, 1)}
    assert starts[1] - starts[0] == pytest.approx(expected, abs=2e-6)
    assert t.meta["offsets_s"][1] - t.meta["offsets_s"][0] == pytest.approx(expected, abs=2e-6)


def test_gloo_communication_threads_are_communication_lanes():
    t = read_trace_dir(PAIR)
    for rl in rank_lanes(t):
        assert len(rl.frontend) == 1 and rl.communication and not rl.compute
        comm = t.where(lane=list(rl.communication))
        assert set(comm["name"]) == {"gloo:all_reduce"}
        assert all(t.lane(n).device == "cpu" for n in rl.communication)
        assert "c10d::allreduce_" in set(t.where(lane=list(rl.frontend))["name"])  # the enqueue
    assert rank_lanes(t, 1).rank == 1
    with pytest.raises(TraceError, match="no rank 7"):
        rank_lanes(t, 7)


def test_merge_keeps_ids_flows_and_deps_unique_per_rank():
    m = merge_ranks({1: small(), 0: small()})
    assert [l.name for l in m.lanes] == ["rank 0 · frontend", "rank 0 · dev", "rank 1 · frontend", "rank 1 · dev"]
    assert len(set(m["id"])) == 4
    assert m["flow"][0] == m["flow"][1] != m["flow"][2] == m["flow"][3]
    assert m["deps"][1] == (m["id"][0],) and m["deps"][3] == (m["id"][2],)
    assert m.meta["clock"] == "each rank from its own start"  # engine traces have no absolute clock
    assert m["start"][0] == m["start"][2] == 0.0


def test_merge_shifts_by_the_absolute_origin():
    a = small(source="chrome", origin_us=1_000_000.0, base_time_ns=5_000_000_000)
    b = small(source="chrome", origin_us=1_000_250.0, base_time_ns=5_000_000_000)
    m = merge_ranks({0: b, 1: a})
    assert m.meta["offsets_s"] == {0: pytest.approx(250e-6), 1: 0.0}
    assert m["start"][0] == pytest.approx(250e-6) and m["issue"][1] == pytest.approx(250e-6)
    assert m.meta["origin_us"] == 1_000_000.0


def test_merged_trace_survives_export(tmp_path):
    t = read_trace_dir(PAIR)
    back = read_chrome_trace(write_chrome_trace(t, tmp_path / "m.json.gz"))
    assert back.lanes == t.lanes and back.ranks == (0, 1)


@pytest.mark.parametrize("bad, err, match", [
    ({}, TraceError, "at least one"),
    ({-1: None}, TraceError, ">= 0"),
    ({0: "x"}, TypeError, "rank 0"),
    ([1, 2], TypeError, "mapping"),
])
def test_merge_errors(bad, err, match):
    if bad == {-1: None}:
        bad = {-1: small()}
    with pytest.raises(err, match=match):
        merge_ranks(bad)


def test_trace_dir_errors_name_the_files(tmp_path):
    with pytest.raises(TraceError, match="not a folder"):
        read_trace_dir(tmp_path / "missing")
    with pytest.raises(TraceError, match="no trace files"):
        read_trace_dir(tmp_path)
    shutil.copy(PAIR / "rank0.json.gz", tmp_path / "a.json.gz")
    shutil.copy(PAIR / "rank0.json.gz", tmp_path / "b.json.gz")
    with pytest.raises(TraceError, match=r"a\.json\.gz and .*b\.json\.gz both say rank 0"):
        read_trace_dir(tmp_path)


def test_rank_from_the_file_name_when_the_file_has_none(tmp_path):
    for r in (0, 1):
        doc = raw(PAIR / f"rank{r}.json.gz")
        del doc["distributedInfo"]
        (tmp_path / f"worker_{r + 2}.json").write_text(json.dumps(doc))
    t = read_trace_dir(tmp_path)
    assert t.ranks == (2, 3)
    (tmp_path / "nameless.json").write_text(json.dumps(doc))
    with pytest.raises(TraceError, match="nameless.json: no distributedInfo.rank"):
        read_trace_dir(tmp_path)


def test_python_stack_lanes_stay_in_their_rank_and_are_listed_apart():
    stack = read_chrome_trace(Path(__file__).parent / "data" / "with_stack_cpu.json.gz")
    m = merge_ranks({0: stack, 1: stack})
    for rl in rank_lanes(m):
        assert len(rl.frontend) == 1 and len(rl.python_stack) > 3
        assert all(m.lane(n).group == f"rank {rl.rank} · python call stack" for n in rl.python_stack)
    names = [l.name for l in m.lanes]
    # rank 0's thread, its call stack, then rank 1's thread and its call stack
    assert [l.rank for l in m.lanes] == sorted(l.rank for l in m.lanes)
    assert names.index(rank_lanes(m, 0).python_stack[0]) == names.index(rank_lanes(m, 0).frontend[0]) + 1


def test_a_folder_is_read_by_read_trace_dir_and_read_chrome_trace_says_so():
    t = read_trace_dir(PAIR)
    assert t.ranks == (0, 1)
    with pytest.raises(TraceError, match="is a directory.*read_trace_dir"):
        read_chrome_trace(PAIR)
