"""Numbers as each vendor spells them: hex-string ids, string times, float ids, ids of any 64 bits
(items 1 and 5), on the fast reader without leaving it, and on the stdlib reader alike.
Also an empty trace file: a warning that says so."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from d2l_async.analysis import queue_length_summary
from d2l_async.trace import EmptyTrace, TraceError, read_chrome_trace, write_chrome_trace
from d2l_async.trace import _json

PUBLIC = Path(__file__).parent / "data" / "public"


def doc_of(name: str) -> dict:
    return json.loads(gzip.decompress((PUBLIC / f"{name}.json.gz").read_bytes()))


def write(tmp_path: Path, doc: dict, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def same(a, b) -> None:
    assert a.lanes == b.lanes
    for col in a.columns:
        x, y = a[col], b[col]
        assert (np.array_equal(x, y, equal_nan=True) if x.dtype.kind == "f" else x.tolist() == y.tolist()), col


def rocm_spelled(doc: dict) -> dict:
    """The ROCm trace as some ROCm 6.2 builds and converters write it: stream and device ids as
    hex strings, correlation ids as decimal strings or floats, times as strings."""
    out = json.loads(json.dumps(doc))
    for i, e in enumerate(out["traceEvents"]):
        a = e.get("args")
        if isinstance(a, dict):
            for key in ("stream", "device"):
                if isinstance(a.get(key), int):
                    a[key] = hex(a[key])
            if "correlation" in a:
                a["correlation"] = str(a["correlation"]) if i % 2 else float(a["correlation"])
        if e.get("ph") == "X" and i % 3 == 0:
            e["ts"] = repr(e["ts"])
            e["dur"] = str(e["dur"])
    return out


@pytest.fixture
def no_slow_path(monkeypatch):
    """Fail if the reader leaves the fast path."""
    if not _json.HAVE_MSGSPEC:
        pytest.skip("msgspec is not installed: only the stdlib reader exists here")

    def slow(raw, path):
        raise AssertionError(f"{path} left the fast path")

    monkeypatch.setattr(_json, "_slow", slow)


def test_the_real_rocm_trace_stays_on_the_fast_path(no_slow_path):
    """ROCm 6.2 writes its runtime calls' ``"stream": "0x0"`` as a string: the whole file used to
    fall back to the stdlib decoder (1,177 MB peak on a 204 MB file)."""
    t = read_chrome_trace(PUBLIC / "rocm62_mi250_minitoy.json.gz")
    assert [l.name for l in t.backend_lanes] == ["cuda:2 stream 0"]


@pytest.mark.parametrize("chunked", [False, True])
def test_rocm_hex_ids_and_string_times_stay_on_the_fast_path(tmp_path, monkeypatch, no_slow_path, chunked):
    original = read_chrome_trace(PUBLIC / "rocm62_mi250_minitoy.json.gz")
    if chunked:
        monkeypatch.setattr(_json, "CHUNK_BYTES", 300)
    spelled = read_chrome_trace(write(tmp_path, rocm_spelled(doc_of("rocm62_mi250_minitoy"))))
    same(original, spelled)
    assert [l.name for l in spelled.backend_lanes] == ["cuda:2 stream 0"]
    assert (queue_length_summary(spelled)[["count", "max"]].values.tolist()
            == queue_length_summary(original)[["count", "max"]].values.tolist())


def test_the_stdlib_reader_converts_alike(tmp_path, monkeypatch):
    original = read_chrome_trace(PUBLIC / "rocm62_mi250_minitoy.json.gz")
    monkeypatch.setattr(_json, "HAVE_MSGSPEC", False)
    same(original, read_chrome_trace(write(tmp_path, rocm_spelled(doc_of("rocm62_mi250_minitoy")))))


LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5, "dur": 1,
          "args": {"correlation": 1}}
KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 2,
          "args": {"correlation": 1, "stream": 7, "device": 0}}


def with_kernel(**change) -> dict:
    k = json.loads(json.dumps(KERNEL))
    for key, v in change.items():
        if key in ("stream", "device", "correlation", "bytes"):
            k["args"][key] = v
        else:
            k[key] = v
    return {"traceEvents": [LAUNCH, k]}


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("field, value, label", [
    ("stream", "seven", "args.stream"), ("stream", 2.5, "args.stream"), ("device", True, "args.device"),
    ("correlation", "0xZZ", "args.correlation"), ("ts", "soon", "ts"), ("dur", [1], "dur"),
    ("stream", 2**64, "args.stream"), ("correlation", 2**63, "args.correlation"), ("ts", {"a": 1}, "ts"),
])
def test_an_unconvertible_value_names_the_file_the_event_and_the_field(tmp_path, monkeypatch, fast, field, value,
                                                                       label):
    if not fast:
        monkeypatch.setattr(_json, "HAVE_MSGSPEC", False)
    p = write(tmp_path, with_kernel(**{field: value}))
    with pytest.raises(TraceError) as info:
        read_chrome_trace(p)
    msg = str(info.value)
    assert str(p) in msg and "traceEvents[1]" in msg and "'k'" in msg and f"has {label} = {value!r}" in msg, msg


def test_odd_values_in_events_the_reader_skips_do_not_matter(tmp_path, no_slow_path):
    doc = with_kernel()
    doc["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": "note", "pid": 1, "tid": 1,
                               "ts": 6, "dur": 1, "args": {"stream": "not a stream"}})
    doc["traceEvents"].append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "ts": "whenever",
                               "args": {"name": "main"}})
    t = read_chrome_trace(write(tmp_path, doc))
    assert sorted(t["name"].tolist()) == ["cudaLaunchKernel", "k"]
    assert t.frontend_lanes[0].name == "main"


@pytest.mark.parametrize("stream, device", [(2**62, 0), (-(2**62), 0), (2**64 - 1, 2**63), (-(2**63), -(2**62))])
def test_stream_and_device_ids_of_any_64_bit_value(tmp_path, no_slow_path, stream, device):
    doc = with_kernel(stream=stream, device=device)
    k2 = dict(doc["traceEvents"][1], name="k2", ts=20, args={"correlation": 2, "stream": 7, "device": 0})
    doc["traceEvents"] += [dict(LAUNCH, ts=15, args={"correlation": 2}), k2]
    t = read_chrome_trace(write(tmp_path, doc))
    names = {l.name: l.stream for l in t.backend_lanes}
    assert names == {f"cuda:{device} stream {stream}": stream, "cuda:0 stream 7": 7}
    assert t["lane"][t["name"] == "k"].tolist() == [f"cuda:{device} stream {stream}"]
    assert sorted(queue_length_summary(t)["stream"].tolist()) == sorted([stream, 7])


def test_hex_stream_beyond_int64_keeps_its_value_and_round_trips(tmp_path, no_slow_path):
    t = read_chrome_trace(write(tmp_path, with_kernel(stream="0xffffffffffffffff")))
    assert [l.stream for l in t.backend_lanes] == [2**64 - 1]
    back = read_chrome_trace(write_chrome_trace(t, tmp_path / "out.json"))
    assert back.lanes == t.lanes
    doc = json.loads((tmp_path / "out.json").read_text())
    kernel = next(e for e in doc["traceEvents"] if e.get("name") == "k")
    assert kernel["args"]["stream"] == 2**64 - 1 and kernel["tid"] < 2**31  # viewers take 32-bit tids


def test_an_empty_trace_loads_with_a_warning_that_says_so(tmp_path):
    p = write(tmp_path, {"traceEvents": [], "schemaVersion": 1})
    with pytest.warns(EmptyTrace, match=r"t\.json: the trace is empty: its traceEvents list holds no events"):
        t = read_chrome_trace(p)
    assert len(t) == 0


def test_a_trace_with_no_work_warns_and_says_what_it_skipped(tmp_path):
    doc = {"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
                           {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}]}
    with pytest.warns(EmptyTrace, match=r"none of its 2 events is work on a lane \(skipped: 1 user_annotation"):
        read_chrome_trace(write(tmp_path, doc))


def test_a_trace_with_work_does_not_warn(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptyTrace)
        assert len(read_chrome_trace(write(tmp_path, with_kernel()))) == 2


@pytest.mark.parametrize("content", [b"", b"  \n", gzip.compress(b"", mtime=0)], ids=["empty", "blank", "empty-gzip"])
def test_a_zero_byte_file_is_a_clear_error(tmp_path, content):
    p = tmp_path / "empty.json"
    p.write_bytes(content)
    with pytest.raises(TraceError, match=r"empty\.json: the file is empty"):
        read_chrome_trace(p)
