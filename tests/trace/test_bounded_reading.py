"""A trace file cannot take the reader's memory, or its time: sizes are checked before memory is
committed, only regular files are read, and an accepted file peaks at 3x its JSON or less.

The hostile files are generated here, never committed.  Each hostile read runs in a child process
with a memory cap and a timeout, so a reader that grows without bound or blocks fails the test
instead of the machine.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
import zlib
from pathlib import Path

import pytest

from d2l_async.trace import TraceError, read_chrome_trace
from d2l_async.trace import _json

GiB = 1 << 30
MiB = 1 << 20


def read_in_child(path: Path, *, available: int | None = None, cap: int = 3 * GiB, timeout: float = 60.0) -> dict:
    """``read_chrome_trace(path)`` in a fresh process under an address-space cap, with
    ``available`` bytes of memory said to be free (None: what there is): what it raised (type,
    message) or how many events it read, and its tracemalloc peak; "TIMEOUT" if it blocked."""
    code = textwrap.dedent(f"""
        import json, resource, sys, tracemalloc
        resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
        from d2l_async.trace import _json, read_chrome_trace
        if {available!r} is not None:
            _json.mem_available = lambda root="/": ({available!r}, None)
        tracemalloc.start()
        try:
            t = read_chrome_trace({str(path)!r})
            out = {{"events": len(t)}}
        except BaseException as exc:
            out = {{"error": type(exc).__name__, "message": str(exc)}}
        out["peak"] = tracemalloc.get_traced_memory()[1]
        print(json.dumps(out))
    """)
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "TIMEOUT"}
    lines = [l for l in res.stdout.splitlines() if l.startswith("{")]
    assert lines, res.stderr[-2000:]
    return json.loads(lines[-1])


def gzip_bomb(path: Path, inflated: int = GiB, *, lie: bool = False) -> Path:
    """A gzip file of about ``inflated / 1000`` bytes that inflates to ``inflated`` (a trace's first
    bytes, then zeros); ``lie``: its trailer says it inflates to 1000 bytes."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(MiB)
    with open(path, "wb") as fh:
        fh.write(c.compress(b'{"traceEvents": ['))
        for _ in range(inflated // MiB):
            fh.write(c.compress(block))
        fh.write(c.flush())
    if lie:
        with open(path, "r+b") as fh:
            fh.seek(-4, os.SEEK_END)
            fh.write((1000).to_bytes(4, "little"))
    return path


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bombs")
    return {"honest": gzip_bomb(d / "bomb.json.gz"), "lying": gzip_bomb(d / "liar.json.gz", lie=True)}


def tiny_trace(path: Path, n: int) -> Path:
    """``n`` cpu_op events of about 80 bytes: the most events, so the most memory, per byte."""
    with open(path, "w") as fh:
        fh.write('{"traceEvents":[')
        fh.write(",".join('{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":%d,"dur":1}' % (2 * i)
                          for i in range(n)))
        fh.write("]}")
    return path


# -- R1: a gzip bomb, /dev/zero ------------------------------------------------------------------
def test_a_gzip_bomb_with_an_honest_trailer_is_refused_before_it_is_inflated(bombs):
    assert bombs["honest"].stat().st_size < 2 * MiB  # 1 MiB of gzip ...
    res = read_in_child(bombs["honest"], available=768 * MiB)  # ... where 256 MiB of JSON fit
    assert res.get("error") == "TraceError", res
    msg = res["message"]
    assert str(bombs["honest"]) in msg and "1.0 GiB" in msg and "256.0 MiB" in msg  # the file, its size, the limit
    assert res["peak"] < 32 * MiB  # nothing inflated


def test_a_gzip_bomb_whose_trailer_lies_stops_inflating_at_the_limit(bombs):
    res = read_in_child(bombs["lying"], available=768 * MiB)
    assert res.get("error") == "TraceError", res
    assert str(bombs["lying"]) in res["message"] and "more than 256.0 MiB" in res["message"]
    assert res["peak"] < 256 * MiB + 3 * _json.READ_BLOCK  # the limit, a block in and a block out


def test_by_default_the_limit_is_what_fits_in_the_memory_available(bombs, monkeypatch):
    monkeypatch.setattr(_json, "mem_available", lambda root="/": (int(1.5 * GiB), 2 * GiB))
    with pytest.raises(TraceError) as info:
        read_chrome_trace(bombs["honest"])
    msg = str(info.value)
    assert "1.0 GiB" in msg and "the limit of 512.0 MiB" in msg
    assert "1/3 of the 1.5 GiB of memory available now, container limit 2.0 GiB" in msg
    assert "max_bytes=" in msg  # how to read it anyway


def test_under_ulimit_v_a_gzip_bomb_is_refused_naming_the_file_and_the_limit(bombs):
    """``ulimit -v`` (RLIMIT_AS) caps what the process may map, which no cgroup shows: the default
    limit reads it too, so the bomb is refused by its trailer instead of a bare MemoryError."""
    res = read_in_child(bombs["honest"], cap=int(1.5 * GiB), timeout=120)  # the memory free is the host's
    assert res.get("error") == "TraceError", res
    assert str(bombs["honest"]) in res["message"] and "ulimit -v" in res["message"]
    assert res["peak"] < 32 * MiB  # refused before inflating


def test_memory_that_runs_out_anyway_is_a_trace_error_naming_the_file_and_the_limits(bombs, tmp_path):
    """max_bytes set above what the address space holds: the MemoryError the read meets becomes a
    TraceError with the file, the limits in force and the fix."""
    code = textwrap.dedent(f"""
        import json, resource
        resource.setrlimit(resource.RLIMIT_AS, ({int(1.5 * GiB)}, {int(1.5 * GiB)}))
        from d2l_async.trace import read_chrome_trace
        try:
            read_chrome_trace({str(bombs["honest"])!r}, max_bytes={4 * GiB})
            out = {{}}
        except BaseException as exc:
            out = {{"error": type(exc).__name__, "message": str(exc)}}
        print(json.dumps(out))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    out = json.loads(res.stdout.splitlines()[-1])
    assert out.get("error") == "TraceError", (out, res.stderr[-1000:])
    assert str(bombs["honest"]) in out["message"] and "RLIMIT_AS" in out["message"] and "1.5 GiB" in out["message"]


def test_the_default_limit_is_a_third_of_the_address_space_left(monkeypatch):
    monkeypatch.setattr(_json, "mem_available", lambda root="/": (16 * GiB, None))
    monkeypatch.setattr(_json, "address_space_left", lambda: (3 * GiB, 4 * GiB))
    limit, why = _json.default_max_bytes()
    assert limit == GiB and "RLIMIT_AS" in why
    monkeypatch.setattr(_json, "address_space_left", lambda: None)
    assert _json.default_max_bytes()[0] == 16 * GiB // _json.PEAK_FACTOR


@pytest.mark.parametrize("reader", ["msgspec", "stdlib"])
@pytest.mark.parametrize("where", ["name", "top"])
def test_a_byte_that_is_not_utf8_is_named_with_its_offset(tmp_path, monkeypatch, reader, where):
    if reader == "stdlib":
        monkeypatch.setattr(_json, "HAVE_MSGSPEC", False)
    elif not _json.HAVE_MSGSPEC:
        pytest.skip("msgspec is not installed")
    monkeypatch.setattr(_json, "READ_BLOCK", 7)  # the offset holds across the blocks it is looked for in
    event = b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1, "pid": 1, "tid": 1}'
    doc = b'{"traceEvents": [' + event + b"," + event + b'], "traceName": "run"}'
    at = doc.index(b"aten::mm", 40) if where == "name" else doc.index(b"run")
    bad = doc[:at] + b"\xe9" + doc[at + 1:]  # latin-1's e-acute
    p = tmp_path / "latin1.json"
    p.write_bytes(bad)
    with pytest.raises(TraceError, match=rf"not UTF-8 JSON: byte {at} \(0xe9\)") as info:
        read_chrome_trace(p)
    assert str(p) in str(info.value)


def test_dev_zero_behind_a_json_link_is_refused_without_reading(tmp_path):
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    res = read_in_child(link, cap=2 * GiB, timeout=30)
    assert res.get("error") == "TraceError", res
    assert str(link) in res["message"] and "character device" in res["message"]
    assert res["peak"] < 16 * MiB


def test_a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    res = read_in_child(fifo, timeout=30)
    assert res.get("error") == "TraceError", res  # "TIMEOUT": the reader blocked on the open
    assert "FIFO" in res["message"] and str(fifo) in res["message"]


def test_links_that_go_nowhere_are_named(tmp_path):
    broken = tmp_path / "broken.json"
    broken.symlink_to(tmp_path / "gone.json")
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(TraceError, match=r"broken\.json: no such file \(a broken symbolic link\)"):
        read_chrome_trace(broken)
    with pytest.raises(TraceError, match=r"loop\.json: cannot read the file \(Too many levels of symbolic links\)"):
        read_chrome_trace(loop)


# -- R2: a plain file's size, and the peak of one that is accepted -------------------------------
def test_a_plain_file_larger_than_the_limit_is_refused_by_its_size(tmp_path):
    p = tiny_trace(tmp_path / "t.json", 20_000)
    size = p.stat().st_size
    with pytest.raises(TraceError) as info:
        read_chrome_trace(p, max_bytes=size - 1)
    msg = str(info.value)
    assert str(p) in msg and f"{size / MiB:.1f} MiB" in msg and f"max_bytes={size - 1}" in msg
    assert len(read_chrome_trace(p, max_bytes=size)) == 20_000  # at the limit: read


def test_reading_peaks_at_three_times_the_json_or_less(tmp_path):
    """The smallest events a profiler writes are the most per byte: 470 bytes an event, 6.6x the
    JSON, before the reader kept its columns coded."""
    p = tiny_trace(tmp_path / "tiny.json", 200_000)
    size = p.stat().st_size
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        trace = read_chrome_trace(p)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert len(trace) == 200_000
    assert peak <= 3 * size, f"peak {peak / size:.2f}x the JSON"


def test_a_gzip_trace_peaks_at_three_times_its_inflated_size_or_less(tmp_path):
    plain = tiny_trace(tmp_path / "tiny.json", 200_000)
    size = plain.stat().st_size
    gz = tmp_path / "tiny.json.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        assert len(read_chrome_trace(gz)) == 200_000
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak <= 3 * size, f"peak {peak / size:.2f}x the inflated JSON"


def test_a_cut_that_falls_inside_an_event_is_moved_to_the_next_one(tmp_path, monkeypatch):
    """Slices are cut at a '},{' between events; one inside a string or a nested list must not cut."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "a},{b" * 30, "pid": 1, "tid": 1, "ts": i, "dur": 1,
               "args": {"shapes": [{"x": 1}, {"y": 2}] * 20}} for i in range(60)]
    p = tmp_path / "cuts.json"
    p.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(_json, "CHUNK_BYTES", 150)
    monkeypatch.setattr(_json, "MIN_CHUNK_BYTES", 150)
    t = read_chrome_trace(p)
    assert len(t) == 60 and t["start"].tolist() == [i / 1e6 for i in range(60)]


@pytest.mark.parametrize("bad", [0, -1, 2.5, "1GB", True])
def test_max_bytes_must_be_a_positive_number_of_bytes(tmp_path, bad):
    p = tiny_trace(tmp_path / "t.json", 3)
    with pytest.raises((TypeError, ValueError), match=f"max_bytes={bad!r}"):
        read_chrome_trace(p, max_bytes=bad)


def test_concatenated_gzip_members_read_as_one_file(tmp_path):
    text = tiny_trace(tmp_path / "t.json", 50).read_bytes()
    p = tmp_path / "two.json.gz"
    p.write_bytes(gzip.compress(text[:300]) + gzip.compress(text[300:]))
    assert len(read_chrome_trace(p)) == 50
    (tmp_path / "junk.json.gz").write_bytes(gzip.compress(text) + b"junk")
    with pytest.raises(TraceError, match="bytes after the end of the gzip stream"):
        read_chrome_trace(tmp_path / "junk.json.gz")


# -- R3: one pid, two process names --------------------------------------------------------------
def test_a_process_named_twice_is_warned_about(tmp_path):
    from d2l_async.trace import NameConflict

    doc = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "trainer"}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 7, "tid": 1, "ts": 1, "dur": 1}]}
    p = tmp_path / "two.json"
    p.write_text(json.dumps(doc))
    with pytest.warns(NameConflict, match=r"two\.json: process 7 is named both 'python' and 'trainer'"):
        read_chrome_trace(p)


# -- R3: a ranks folder says what it skipped and which ranks are missing --------------------------
def rank_file(folder: Path, rank: int, world: int) -> Path:
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1_700_000_000_000_000 + i,
           "dur": 1} for i in range(3)]
    p = folder / f"rank{rank}.json"
    p.write_text(json.dumps({"traceEvents": ev, "distributedInfo": {"rank": rank, "world_size": world}}))
    return p


def test_a_ranks_folder_warns_about_every_entry_it_skips(tmp_path):
    from d2l_async.trace import SkippedEntries, read_trace_dir

    rank_file(tmp_path, 0, 2)
    rank_file(tmp_path, 1, 2)
    (tmp_path / "rank2.json").symlink_to(tmp_path / "gone.json")  # broken
    (tmp_path / "rank3.json").symlink_to(tmp_path / "rank3.json")  # a loop
    os.mkfifo(tmp_path / "rank4.json")  # a FIFO: never opened
    (tmp_path / "notes.txt").write_text("not a trace")  # not named like one: no word about it
    with pytest.warns(SkippedEntries) as caught:
        t = read_trace_dir(tmp_path)
    msg = str(caught[0].message)
    assert "3 entries" in msg
    assert "rank2.json (a broken symbolic link)" in msg and "rank3.json (Too many levels of symbolic links)" in msg
    assert "rank4.json (a FIFO, not a regular file)" in msg and "notes.txt" not in msg
    assert t.ranks == (0, 1) and len(t.meta["skipped_entries"]) == 3


def test_a_ranks_folder_names_the_ranks_of_its_world_that_have_no_file(tmp_path):
    from d2l_async.trace import MissingRanks, read_trace_dir

    for r in (0, 2, 3, 4):
        rank_file(tmp_path, r, 8)
    with pytest.warns(MissingRanks, match=r"a world of 8 ranks; 4 of them have no file here: ranks 1, 5-7"):
        t = read_trace_dir(tmp_path)
    assert t.meta["missing_ranks"] == [1, 5, 6, 7]


def test_world_size_two_with_rank_one_missing(tmp_path):
    from d2l_async.trace import MissingRanks, read_trace_dir

    rank_file(tmp_path, 0, 2)
    with pytest.warns(MissingRanks, match=r"1 of them have no file here: rank 1 \(the merged trace shows 1 of 2\)"):
        read_trace_dir(tmp_path)
