"""Exports that HolisticTraceAnalysis reads as we do: HTA 0.5.0 is the oracle.

For each case HTA runs on the original files and on our export of what we read from them
(``write_chrome_trace`` for one rank, ``write_trace_dir`` for a merged pair), with and without
the last profiler step; per rank and stream the queue length's ``count``, ``max`` and ``mean``
must be equal.  Before the export wrote ``distributedInfo``, the profiler steps and the original
clock, HTA read two exported ranks as one rank 0, kept the whole last step and ordered equal
times differently.
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
from pathlib import Path

import pytest

from d2l_async.trace import (Trace, TraceError, merge_ranks, read_chrome_trace, read_trace_dir, split_ranks,
                             write_chrome_trace, write_trace_dir)

DATA = Path(__file__).parent / "data"
A100 = DATA / "public" / "a100_rank3_of_8.json.gz"
NCCL_PAIR = DATA / "public" / "hta_sampled_pair"
GLOO_PAIR = DATA / "gloo_pair"

hta = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis (the oracle) is not installed")
logging.getLogger("hta").setLevel(logging.ERROR)


def hta_numbers(folder: Path, include: bool):
    """HTA's ranks and its queue-length summary rows (rank, stream, count, max, mean)."""
    ta = hta.TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=include)
    ranks = sorted(ta.t.traces)
    s = ta.get_queue_length_summary(ranks=ranks)
    rows = []
    if s is not None and len(s):
        s = s.droplevel(0, axis=1).reset_index()
        rows = sorted((int(r["rank"]), int(r["stream"]), int(r["count"]), int(r["max"]), float(r["mean"]))
                      for _, r in s.iterrows())
    return ranks, rows, {r: ta.t.get_iterations(r) for r in ranks}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """case -> (folder of the originals, folder of our export)."""
    out = {}
    d = tmp_path_factory.mktemp("a100")
    orig = d / "orig"
    orig.mkdir()
    shutil.copy(A100, orig)
    (d / "ours").mkdir()
    write_chrome_trace(read_chrome_trace(A100), d / "ours" / "a100.json.gz")
    out["a100 (one rank)"] = orig, d / "ours"
    for name, folder in (("nccl pair", NCCL_PAIR), ("gloo pair", GLOO_PAIR)):
        d = tmp_path_factory.mktemp(name.replace(" ", "_"))
        write_trace_dir(read_trace_dir(folder), d / "ours")
        out[name] = folder, d / "ours"
    return out


@pytest.mark.parametrize("include", [False, True], ids=["without last step", "with last step"])
@pytest.mark.parametrize("case", ["a100 (one rank)", "nccl pair", "gloo pair"])
def test_hta_gives_its_numbers_on_the_original(exported, case, include):
    orig, ours = exported[case]
    ranks_o, rows_o, iters_o = hta_numbers(orig, include)
    ranks_n, rows_n, iters_n = hta_numbers(ours, include)
    assert ranks_n == ranks_o == ({"a100 (one rank)": [3]}.get(case, [0, 1]))
    assert iters_n == iters_o and all(iters_o.values())  # every rank's profiler steps
    assert [r[:4] for r in rows_n] == [r[:4] for r in rows_o]
    assert [r[4] for r in rows_n] == pytest.approx([r[4] for r in rows_o], rel=1e-12)
    if case != "gloo pair":  # gloo's CPU-only ranks have no device queue
        assert len({r[0] for r in rows_o}) == len(ranks_o) and rows_o


def head_of(path: Path) -> tuple[str, dict]:
    text = gzip.decompress(path.read_bytes()).decode()
    return text[:200], json.loads(text)


def test_the_export_says_rank_world_size_backend_and_clock_first(tmp_path):
    path = write_chrome_trace(read_chrome_trace(A100), tmp_path / "x.json.gz")
    text, doc = head_of(path)
    assert text.startswith('{"distributedInfo": {"rank": 3, ')  # HTA's rank pattern: '"rank":\s+(\d+)'
    assert doc["distributedInfo"] == {"rank": 3, "backend": "nccl", "world_size": 8}
    original = json.loads(gzip.decompress(A100.read_bytes()))
    assert doc["baseTimeNanoseconds"] == 0  # the original's ts are absolute µs
    steps = sorted(e["ts"] for e in doc["traceEvents"] if str(e.get("name")).startswith("ProfilerStep#"))
    assert steps == sorted(e["ts"] for e in original["traceEvents"] if str(e.get("name")).startswith("ProfilerStep#")
                           and e.get("cat") == "user_annotation")


def test_a_folder_export_is_one_file_per_rank_and_reads_back_as_the_same_trace(tmp_path):
    merged = read_trace_dir(NCCL_PAIR)
    files = write_trace_dir(merged, tmp_path / "dir")
    assert sorted(p.name for p in files) == ["rank0.json.gz", "rank1.json.gz"]
    for r, p in zip((0, 1), sorted(files)):
        _, doc = head_of(p)
        assert doc["distributedInfo"] == {"rank": r, "backend": "nccl", "world_size": 128}
    back = read_trace_dir(tmp_path / "dir")
    assert back.lanes == merged.lanes
    assert back.meta["offsets_s"] == {0: 0.0, 1: pytest.approx(merged.meta["offsets_s"][1], abs=1e-9)}
    for col in ("id", "flow", "lane", "kind", "name"):
        assert back[col].tolist() == merged[col].tolist(), col
    for col in ("start", "end"):
        assert abs(back[col] - merged[col]).max() < 1e-9, col


def test_split_ranks_undoes_merge_ranks():
    a, b = read_chrome_trace(NCCL_PAIR / "sampled_rank-0.json.gz"), read_chrome_trace(NCCL_PAIR / "sampled_rank-1.json.gz")
    parts = split_ranks(merge_ranks({0: a, 1: b}))
    for orig, part in ((a, parts[0]), (b, parts[1])):
        assert part.lanes == orig.lanes
        for col in ("id", "flow", "lane", "deps"):
            assert part[col].tolist() == orig[col].tolist(), col
        assert abs(part["start"] - orig["start"]).max() < 1e-9
        assert part.meta["steps"] == orig.meta["steps"]
    assert parts[1].meta["distributed"] == {"backend": "nccl", "rank": 1, "world_size": 128}


def test_split_ranks_of_a_one_rank_trace_is_a_clear_error():
    with pytest.raises(TraceError, match="no ranks to split"):
        split_ranks(read_chrome_trace(A100))


def test_a_folder_with_other_trace_files_is_refused(tmp_path):
    (tmp_path / "old.json").write_text("{}")
    with pytest.raises(TraceError, match=r"other trace files \['old.json'\]"):
        write_trace_dir(read_trace_dir(GLOO_PAIR), tmp_path)


def test_trace_method_writes_a_folder(tmp_path):
    files = write_trace_dir(read_trace_dir(GLOO_PAIR), tmp_path / "g")
    assert len(files) == 2


def test_one_file_of_a_merged_trace_shows_every_ranks_steps_for_perfetto(tmp_path):
    merged = read_trace_dir(GLOO_PAIR)
    text, doc = head_of(write_chrome_trace(merged, tmp_path / "all.json.gz"))
    assert "distributedInfo" not in doc  # several ranks: that is what write_trace_dir is for
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    steps = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"].startswith("ProfilerStep#")]
    per_rank = merged.meta["per_rank"]
    assert len(steps) == sum(len(per_rank[r]["steps"]) for r in (0, 1))
    for r in (0, 1):
        mine = sorted(e["ts"] for e in steps if threads[e["pid"], e["tid"]].startswith(f"rank {r} · "))
        expected = [s["start"] + merged.meta["offsets_s"][r] for s in per_rank[r]["steps"]]
        zero = merged.meta["origin_us"]
        assert mine == pytest.approx([zero + x * 1e6 for x in expected], abs=1e-3)
    back = read_chrome_trace(tmp_path / "all.json.gz")
    assert back.lanes == merged.lanes and back["name"].tolist() == merged["name"].tolist()


def test_an_engine_trace_export_claims_no_rank_and_no_clock(tmp_path):
    from d2l_async.trace import Event

    t = Trace.from_events([Event("frontend", "op", "a", 0.0, 0.001)], meta={"source": "engine"})
    text, doc = head_of(write_chrome_trace(t, tmp_path / "e.json.gz"))
    assert text.startswith('{"traceEvents"') and "baseTimeNanoseconds" not in doc
