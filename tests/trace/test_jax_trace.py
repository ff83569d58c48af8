"""jax.profiler traces (tests/trace/data/jax/, recorded by scripts/record_jax_traces.py with jax 0.10.2) read
as lanes and events of the one trace model, and drawn and analysed by the package's own code.

No JAX needed: the traces are committed files.
"""

from __future__ import annotations

import gzip
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from d2l_async.analysis import queue_length_summary
from d2l_async.data import sample_path
from d2l_async.trace import (BACKEND_KINDS, JAX_WAIT, Trace, TraceError, read_chrome_trace, read_jax_trace,
                             read_trace)

DATA = Path(__file__).parent / "data" / "jax"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())


def load(name: str) -> Trace:
    return read_jax_trace(DATA / f"{name}.json.gz")


def work(t: Trace) -> Trace:
    return t.where(kind=BACKEND_KINDS, lane=[l.name for l in t.backend_lanes])


def linked(t: Trace) -> tuple[Trace, Trace]:
    """(launches, executions), each launch paired with one execution by flow id."""
    return t.where(kind="launch"), work(t)


def test_the_fixtures_say_how_they_were_recorded():
    assert MANIFEST["jax"] and MANIFEST["recorded_by"] == "scripts/record_jax_traces.py"
    for name, f in MANIFEST["files"].items():
        assert (DATA / f["file"]).stat().st_size == f["bytes"] < 400_000, name


@pytest.mark.parametrize("name", ["ten_dots", "jit_calls", "blocking_loop", "two_devices"])
def test_each_dispatch_is_a_launch_linked_to_its_execution(name):
    t = load(name)
    launches, execs = linked(t)
    assert t.meta["source"] == "jax" and not t.is_virtual
    assert [l.name for l in t.frontend_lanes] == ["python"]
    assert len(launches) == len(execs) > 0
    assert t.meta["unmatched_launches"] == t.meta["unmatched_executions"] == 0
    # one flow id per pair, shared by the launch and its execution
    assert sorted(launches["flow"].tolist()) == sorted(execs["flow"].tolist())
    assert len(set(execs["flow"].tolist())) == len(execs) and (execs["flow"] >= 0).all()
    by_flow = {int(f): (float(s), str(d)) for f, s, d in zip(launches["flow"], launches["start"], launches["device"])}
    for f, issue, start, dev in zip(execs["flow"], execs["issue"], execs["start"], execs["device"]):
        assert issue == by_flow[int(f)][0]  # issued when its dispatch began
        assert start >= issue  # and run after it
        assert by_flow[int(f)][1] == dev  # the dispatch targets its execution's device


def test_ten_dots_queue_up_before_the_first_runs():
    """The book's lesson in a real framework: ten products issued while the first still runs."""
    t = load("ten_dots")
    execs = work(t)
    dots = execs.filter(execs["name"] == "jit_dot")
    assert len(dots) == 10
    launches = t.filter(np.isin(t["flow"], dots["flow"]) & (t["kind"] == "launch"))
    assert launches["end"].max() < dots["end"].min()  # every dot issued before the first one finished
    q = queue_length_summary(t)
    assert int(q["max"].max()) >= 9
    assert t.meta["skipped"]["python tracer"] > 1000  # recorded with the Python tracer on: skipped
    assert {"lower_sharding_computation", "backend_compile_and_load"} <= set(t.where(kind="runtime")["name"])
    wait = t.where(kind="block")
    assert len(wait) == 1 and wait["end"][0] >= dots["end"].max() - 1e-4  # block_until_ready: until the last


def test_twenty_jitted_calls_return_before_the_work():
    t = load("jit_calls")
    launches, execs = linked(t)
    assert set(execs["name"]) == {"jit__lambda"} and len(execs) == 20
    assert set(t.where(kind="op", lane="python")["name"]) == {"PjitFunction(<lambda>)"}
    assert launches["end"].max() < 0.5 * execs["end"].max()  # all twenty queued in the first half
    assert int(queue_length_summary(t)["max"].max()) >= 15


def test_a_blocking_loop_shows_its_waits_and_its_inline_ops():
    t = load("blocking_loop")
    launches, execs = linked(t)
    assert len(execs) == 11
    # the one-element adds XLA ran on the calling thread, inside their dispatch (when nothing was in flight)
    span = {int(f): (s, e) for f, s, e in zip(launches["flow"], launches["start"], launches["end"])}
    inside = sum(span[int(f)][0] <= s and e <= span[int(f)][1] for f, s, e in zip(execs["flow"], execs["start"],
                                                                                    execs["end"]))
    assert inside >= t.meta["inline_executions"] >= 1  # (a dispatch may also wait for a worker to finish)
    waits = t.where(kind="block")
    assert len(waits) >= 2 and set(waits["reason"]) <= {"await", "np.asarray"}
    ends = np.sort(execs["end"])
    for s, e in zip(waits["start"], waits["end"]):  # a wait is recorded only where work ended during it
        assert ((ends > s) & (ends <= e)).any()


def test_two_devices_are_two_backend_lanes_and_a_named_wait_keeps_its_names():
    t = load("two_devices")
    assert [l.name for l in t.backend_lanes] == ["cpu:0 (XLA)", "cpu:1 (XLA)"]
    execs = work(t)
    on1 = execs.filter(execs["lane"] == "cpu:1 (XLA)")
    on0 = execs.filter((execs["lane"] == "cpu:0 (XLA)") & (execs["name"] == "jit_matmul"))
    assert len(on1) == 8 and set(on1["name"]) == {"jit_matmul"} and len(on0) == 3
    # z (on cpu:0) ran inline and was ready: its annotated wait converted a ready value (runtime, not a block)
    named = t.filter(t["name"] == "block_until_ready")
    assert len(named) == 1 and named["kind"][0] == "runtime"
    # the same function on two devices: the chain's products were issued before z's wait, cpu:0's after it
    assert on1["issue"].max() < named["start"][0] < named["end"][0] <= on0["issue"].min()
    assert (on1["start"] >= on1["issue"]).all() and (on0["start"] >= on0["issue"]).all()
    # the wait for the chain on cpu:1 is a block that ends after the chain's last product
    blocks = t.where(kind="block")
    assert len(blocks) == 1 and blocks["end"][0] >= on1["end"].max() - 1e-4


def test_an_annotated_wait_is_a_block_with_its_reason_and_source(tmp_path):
    """``d2l_async.wait`` annotations (what capture.jax_wait writes) become blocks when work ended in them;
    the ``Await`` inside is the same wait and is dropped."""
    doc = json.loads(gzip.decompress((DATA / "two_devices.json.gz").read_bytes()))
    ev = doc["traceEvents"]
    python = next(e["tid"] for e in ev if e.get("name") == "thread_name" and e["args"]["name"] == "python")
    last = max(e["ts"] + e.get("dur", 0) for e in ev if e.get("ph") == "X")
    ev.append({"ph": "X", "pid": ev[0]["pid"], "tid": python, "ts": 11_500.0, "dur": last - 11_500.0 + 1,
               "name": JAX_WAIT, "args": {"reason": "waitall", "source": "a.block_until_ready()"}})
    p = tmp_path / "annotated.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    t = read_jax_trace(p)
    blocks = t.where(kind="block")
    assert list(blocks["reason"]) == ["waitall"] and list(blocks["source"]) == ["a.block_until_ready()"]
    assert t.meta["nested_waits"] >= 1


def test_the_timeline_draws_both_sides():
    from d2l_async import viz

    t = load("ten_dots")
    fig = viz.plot_timeline(t)
    assert list(fig.layout.yaxis.ticktext) == ["python", "cpu:0 (XLA)"]
    rows = dict(zip(fig.layout.yaxis.ticktext, fig.layout.yaxis.tickvals))
    bars = {d.name: list(d.y) for d in fig.data if d.type == "bar"}
    assert bars["op"].count(rows["cpu:0 (XLA)"]) == len(work(t))  # one bar per execution on the backend row
    assert bars["launch"].count(rows["python"]) == len(t.where(kind="launch"))


def test_a_folder_reads_the_newest_run(tmp_path):
    for i, name in enumerate(("jit_calls", "ten_dots")):
        run = tmp_path / "plugins" / "profile" / f"2026_01_0{i + 1}_00_00_00"
        run.mkdir(parents=True)
        shutil.copyfile(DATA / f"{name}.json.gz", run / "perfetto_trace.json.gz")
    assert len(work(read_jax_trace(tmp_path))) == len(work(load("ten_dots")))
    assert read_trace(tmp_path).meta["source"] == "jax"


def test_read_trace_picks_the_reader_by_content():
    assert read_trace(DATA / "jit_calls.json.gz").meta["source"] == "jax"
    assert read_trace(sample_path("a100_simple_add")).meta["source"] == "chrome"


def test_the_chrome_reader_refuses_a_jax_trace_and_names_the_reader():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no EmptyTrace warning: an error that says what to do
        with pytest.raises(TraceError, match=r"jax\.profiler trace .*read_jax_trace"):
            read_chrome_trace(DATA / "ten_dots.json.gz")


# -- what the reader cannot read, it says ----------------------------------------------------------------------
def write(tmp_path, doc, name="t.json.gz") -> Path:
    p = tmp_path / name
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return p


def test_a_torch_trace_is_refused_with_the_reader_to_use():
    with pytest.raises(TraceError, match=r"not a jax\.profiler trace.*read_chrome_trace"):
        read_jax_trace(sample_path("a100_simple_add"))


def test_an_accelerator_trace_is_refused(tmp_path):
    doc = {"traceEvents": [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
                           {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:GPU:0"}}]}
    with pytest.raises(TraceError, match=r"/device:GPU:0.*CPU backend"):
        read_jax_trace(write(tmp_path, doc))


@pytest.mark.parametrize("doc, words", [
    ({"traceEvents": []}, "no '/host:CPU' process"),
    ({"events": []}, "expected an object with a 'traceEvents' list"),
    ("text", "expected an object"),
    ({"traceEvents": [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
                      {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "name": "ParseArguments"}]},
     "without JAX work"),
    ({"traceEvents": [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
                      {"ph": "X", "pid": 1, "tid": 1, "ts": "soon", "dur": 5, "name": "x"}]},
     "non-numeric or missing 'ts'"),
    ({"traceEvents": [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
                      {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "name": "ynn_fusion",
                       "args": {"run_id": "seven"}}]},
     "not an integer"),
])
def test_malformed_files_get_a_clear_error(tmp_path, doc, words):
    p = write(tmp_path, doc)
    with pytest.raises(TraceError) as info:
        read_jax_trace(p)
    assert words in str(info.value) and str(p) in str(info.value)


def test_a_folder_without_a_trace(tmp_path):
    with pytest.raises(TraceError, match="without a jax.profiler trace"):
        read_jax_trace(tmp_path)


def test_an_execution_dispatched_before_the_recording_is_unmatched(tmp_path):
    def x(ts, dur, name, tid=1, **args):
        return {"ph": "X", "pid": 1, "tid": tid, "ts": ts, "dur": dur, "name": name, "args": args}

    doc = {"traceEvents": [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "python"}},
        x(0, 50, "ynn_fusion", tid=2, run_id="7", hlo_module="jit_dot", device_ordinal="0"),  # queued earlier
        x(10, 5, "PjitFunction(dot)"), x(11, 3, "CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice"),
        x(60, 40, "ynn_fusion", tid=2, run_id="8", hlo_module="jit_dot", device_ordinal="0"),
    ]}
    t = read_jax_trace(write(tmp_path, doc))
    execs = work(t)
    assert t.meta["unmatched_executions"] == 1 and t.meta["unmatched_launches"] == 0
    assert list(execs["flow"] >= 0) == [False, True]
    assert execs["issue"][1] == t.where(kind="launch")["start"][0]


def test_bad_arguments():
    with pytest.raises(TypeError, match="path"):
        read_jax_trace(3)
    with pytest.raises(TypeError, match="max_bytes"):
        read_jax_trace(DATA / "ten_dots.json.gz", max_bytes="big")
    with pytest.raises(TraceError, match="limit"):
        read_jax_trace(DATA / "ten_dots.json.gz", max_bytes=1000)
