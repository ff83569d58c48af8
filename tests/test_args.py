"""The shared argument checks (d2l_async._args) and the entry points that used to hang on bad input."""

from __future__ import annotations

import math
import threading

import pytest

from d2l_async._args import having, instance, integer, max_workers, number, workers


def _returns_within(fn, seconds: float = 10.0):
    """Run ``fn`` in a thread; its exception, or a failure when it has not returned in time."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True, name="bad-input call")
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"no answer in {seconds} s"
    return box


def test_integer_names_argument_value_and_range():
    with pytest.raises(ValueError, match=r"size must be an integer between 1 and 8, got 9"):
        integer("size", 9, minimum=1, maximum=8)
    with pytest.raises(TypeError, match=r"size must be an integer .*got float nan"):
        integer("size", math.nan, minimum=1)
    with pytest.raises(TypeError, match="got bool"):
        integer("n", True)
    assert integer("n", 3, minimum=1) == 3


def test_number_refuses_nan_and_inf():
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="delay must be a finite number"):
            number("delay", bad)
    with pytest.raises(ValueError, match="> 0"):
        number("step", 0, above=0)
    assert number("x", 2) == 2.0


def test_instance_and_having_name_the_argument():
    with pytest.raises(TypeError, match="trace must be a d2l_async.trace.Trace, got object"):
        instance("trace", object(), int, what="d2l_async.trace.Trace")
    with pytest.raises(TypeError, match=r"r must be a Result \(with \.raw\), got str"):
        having("r", "x", ("raw",), what="a Result")


def test_worker_bound_is_at_least_64_and_within_the_os_limits():
    top = max_workers()
    assert top >= 1
    assert workers("workers", top) == top
    with pytest.raises(ValueError, match=f"workers must be an integer between 1 and {top}, got {top + 1}"):
        workers("workers", top + 1)


@pytest.mark.parametrize("make", ["ThreadedEngine", "AsyncRuntime", "asynchronous"])
def test_a_huge_worker_count_is_refused_at_once(make):
    import d2l_async
    from d2l_async.torch_async import AsyncRuntime

    factory = {"ThreadedEngine": d2l_async.ThreadedEngine, "AsyncRuntime": AsyncRuntime,
               "asynchronous": lambda **k: d2l_async.asynchronous(**k).__enter__()}[make]
    box = _returns_within(lambda: factory(workers=10**12))
    assert isinstance(box.get("error"), ValueError), box
    assert "workers" in str(box["error"]) and "1000000000000" in str(box["error"])


def test_threaded_engine_bounds_workers_per_device():
    import d2l_async

    per_device = max_workers() // 2
    with pytest.raises(ValueError, match=f"between 1 and {per_device}"):
        d2l_async.ThreadedEngine(workers=per_device + 1, devices=("cpu:0", "cpu:1"))


@pytest.mark.parametrize("call", ["wrap_line", "format_table"])
def test_report_text_refuses_a_nan_width_instead_of_looping(call):
    from d2l_async.report import format_table, wrap_line

    fn = {"wrap_line": lambda: wrap_line("a check", total=math.nan),
          "format_table": lambda: format_table([], width=math.nan)}[call]
    box = _returns_within(fn)
    assert isinstance(box.get("error"), TypeError), box
    assert ("total" if call == "wrap_line" else "width") in str(box["error"])


def test_measure_refuses_more_runs_than_it_can_keep():
    from d2l_async import measure
    from d2l_async.benchmark import MAX_RUNS

    for arg in ("warmup", "repeat"):
        box = _returns_within(lambda: measure(lambda: None, **{arg: 10**12}))
        assert isinstance(box.get("error"), ValueError) and "between" in str(box["error"]), box
        assert str(MAX_RUNS) in str(box["error"])
