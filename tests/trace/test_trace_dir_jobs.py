"""read_trace_dir checks that a folder's files are one job's."""

from __future__ import annotations

import gzip
import json
import shutil
import warnings
from pathlib import Path

import pytest

from d2l_async.trace import MixedJobs, Trace, TraceError, read_trace_dir

DATA = Path(__file__).parent / "data"
GLOO = DATA / "gloo_pair"
NCCL = DATA / "public" / "hta_sampled_pair"
A100 = DATA / "public" / "a100_rank3_of_8.json.gz"


def quietly(folder: Path) -> Trace:
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixedJobs)
        return read_trace_dir(folder)


@pytest.mark.parametrize("folder", [GLOO, NCCL], ids=["gloo pair", "nccl pair"])
def test_one_jobs_files_merge_without_a_word(folder):
    t = quietly(folder)
    assert t.ranks == (0, 1) and "job_problems" not in t.meta


@pytest.fixture
def mixed(tmp_path):
    """Three jobs: rank 3 of an 8-GPU NCCL job (2022), rank 1 of a 2-process gloo run (2026),
    rank 0 of a 128-GPU NCCL job."""
    shutil.copy(A100, tmp_path)
    shutil.copy(GLOO / "rank1.json.gz", tmp_path)
    shutil.copy(NCCL / "sampled_rank-0.json.gz", tmp_path)
    return tmp_path


def test_a_mixed_jobs_folder_warns_naming_the_files(mixed):
    with pytest.warns(MixedJobs) as caught:
        t = read_trace_dir(mixed)
    msg = str(caught[0].message)
    assert msg.startswith(f"{mixed}: the files do not look like one job: ")
    assert ("world sizes differ (sampled_rank-0.json.gz: 128, rank1.json.gz: 2, a100_rank3_of_8.json.gz: 8)"
            in msg), msg
    assert "backends differ (sampled_rank-0.json.gz: 'nccl', rank1.json.gz: 'gloo', a100_rank3_of_8.json.gz: 'nccl')" in msg
    assert "time ranges do not overlap: rank1.json.gz starts at 2026-" in msg and "days after a100_rank3_of_8" in msg
    assert msg.endswith("merged anyway (strict=True raises)")
    assert t.ranks == (0, 1, 3) and len(t.meta["job_problems"]) == 3


def test_strict_raises(mixed):
    with pytest.raises(TraceError, match="do not look like one job: world sizes differ"):
        read_trace_dir(mixed, strict=True)
    with pytest.raises(TypeError, match="strict must be True or False"):
        read_trace_dir(mixed, strict="yes")


def rewrite(src: Path, dst: Path, change) -> None:
    doc = json.loads(gzip.decompress(src.read_bytes()))
    change(doc)
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))


def test_ranks_profiled_a_day_apart_are_not_one_run(tmp_path):
    shutil.copy(GLOO / "rank0.json.gz", tmp_path)

    def later(doc):
        for e in doc["traceEvents"]:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] += 86_400e6

    rewrite(GLOO / "rank1.json.gz", tmp_path / "rank1.json.gz", later)
    with pytest.warns(MixedJobs, match=r"time ranges do not overlap: rank1\.json\.gz starts at .*, 24\.0 hours after "
                                       r"rank0\.json\.gz ends") as caught:
        read_trace_dir(tmp_path)
    assert "world sizes" not in str(caught[0].message)


def test_a_rank_outside_its_world(tmp_path):
    shutil.copy(GLOO / "rank0.json.gz", tmp_path)

    def world_of_one(doc):
        doc["distributedInfo"]["world_size"] = 1

    rewrite(GLOO / "rank1.json.gz", tmp_path / "rank1.json.gz", world_of_one)
    with pytest.warns(MixedJobs, match=r"rank1\.json\.gz is rank 1 of a world of 1"):
        read_trace_dir(tmp_path)
