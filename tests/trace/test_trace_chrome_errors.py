"""Bad input gives one clear error, TraceError, naming the file and the problem."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from d2l_async.data import sample_path
from d2l_async.trace import Trace, TraceError, read_chrome_trace


def check(path, *words):
    with pytest.raises(TraceError) as info:
        read_chrome_trace(path)
    msg = str(info.value)
    assert str(path) in msg
    for w in words:
        assert w in msg, msg
    return msg


def test_missing_file(tmp_path):
    check(tmp_path / "nope.json.gz", "no such file")


@pytest.mark.parametrize("bad", [None, 3, ["a.json"]])
def test_path_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match="file path"):
        read_chrome_trace(bad)


def test_directory(tmp_path):
    check(tmp_path, "directory")


def test_not_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("this is not json {")
    check(p, "not valid JSON")


def test_binary_garbage(tmp_path):
    p = tmp_path / "x.json"
    p.write_bytes(bytes(range(256)))
    check(p, "not valid JSON")


def test_truncated_gzip(tmp_path):
    data = sample_path("a100_simple_add").read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    check(p, "gzip")


def test_gzip_of_garbage(tmp_path):
    p = tmp_path / "g.json.gz"
    p.write_bytes(gzip.compress(b"\x00\x01 not json"))
    check(p, "not valid JSON")


@pytest.mark.parametrize("doc", [{"foo": 1}, {"traceEvents": 3}, 42, "text", None])
def test_json_that_is_not_a_trace(tmp_path, doc):
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    check(p, "not a Chrome trace")


GOOD = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 2,
        "args": {"correlation": 1, "stream": 7, "device": 0}}


@pytest.mark.parametrize("bad", [
    {"ts": "soon"}, {"ts": None}, {"dur": [1]}, {"args": {"stream": "seven", "correlation": 1}},
    {"args": {"correlation": "x", "stream": 7}}, {"name": 5}, {"args": [1, 2]}, {"ts": {"a": 1}},
])
def test_wrong_types(tmp_path, bad):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"traceEvents": [{**GOOD, **bad}]}))
    check(p)


def test_missing_ts(tmp_path):
    ev = dict(GOOD)
    del ev["ts"]
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"traceEvents": [ev]}))
    check(p)


def test_event_that_is_not_an_object(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"traceEvents": [GOOD, 7]}))
    check(p, "traceEvents[1]")


values = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**40), st.floats(allow_nan=True),
                   st.text(max_size=5), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "correlation", "stream", "device", "bytes"]),
       value=values)
def test_any_mutation_gives_a_trace_or_trace_error(tmp_path, key, value):
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5, "dur": 1,
              "args": {"correlation": 1}}
    ev = json.loads(json.dumps(GOOD))
    if key in ("correlation", "stream", "device", "bytes"):
        ev["args"][key] = value
    else:
        ev[key] = value
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"traceEvents": [launch, ev]}))
    try:
        trace = read_chrome_trace(p)
    except TraceError as exc:
        assert str(p) in str(exc)
    else:
        assert isinstance(trace, Trace)


def test_the_hint_for_a_value_that_is_not_a_trace_names_functions_that_exist():
    """Every ``d2l_async...`` call the "expects a Trace" hint suggests can be made."""
    import importlib
    import re

    from d2l_async.trace import queue_steps

    with pytest.raises(TypeError) as info:
        queue_steps("a100_simple_add", "cuda:0 stream 7")
    named = re.findall(r"(d2l_async(?:\.\w+)+)\(", str(info.value))
    assert "d2l_async.trace.read_chrome_trace" in named
    for dotted in named:
        module, _, attr = dotted.rpartition(".")
        assert callable(getattr(importlib.import_module(module), attr, None)), dotted
