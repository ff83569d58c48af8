"""Benchmark prints like the book's and synchronizes queued work at both ends."""

from __future__ import annotations

import io
import re
import sys
import threading
import time
import types

import pytest

from d2l_async.benchmark import Benchmark, Measurement, measure


class FakeEngine(types.ModuleType):
    """Stands in for d2l_async.engine: work 'queued' on a thread that waitall_all() joins."""

    def __init__(self) -> None:
        super().__init__("d2l_async.engine")
        self.pending: list[threading.Thread] = []
        self.calls = 0

    def queue(self, seconds: float) -> None:
        t = threading.Thread(target=time.sleep, args=(seconds,))
        t.start()
        self.pending.append(t)

    def waitall_all(self, timeout: float | None = None) -> None:
        self.calls += 1
        for t in self.pending:
            t.join(timeout=10)
            assert not t.is_alive(), "fake queued work did not finish"
        self.pending.clear()


@pytest.fixture
def fake_engine(monkeypatch):
    eng = FakeEngine()
    monkeypatch.setitem(sys.modules, "d2l_async.engine", eng)
    yield eng
    eng.waitall_all()


def test_prints_like_the_book():
    out = io.StringIO()
    with Benchmark("numpy", file=out) as b:
        sum(range(1000))
    assert re.fullmatch(r"numpy: \d+\.\d{4} sec\n", out.getvalue())
    assert b.elapsed is not None and b.elapsed >= 0
    assert out.getvalue() == f"numpy: {b.elapsed:.4f} sec\n"


def test_default_description_is_done():
    out = io.StringIO()
    with Benchmark(file=out):
        pass
    assert out.getvalue().startswith("Done: ")


def test_sync_on_entry_does_not_bill_earlier_work(fake_engine):
    fake_engine.queue(0.3)  # queued by an "earlier cell"
    with Benchmark("sync", file=None) as b:
        pass
    assert b.elapsed < 0.15, "work queued before the block was billed to it"
    assert fake_engine.calls == 2  # entry and exit


def test_sync_on_exit_bills_work_queued_inside(fake_engine):
    with Benchmark("sync", file=None) as synced:
        fake_engine.queue(0.2)
    with Benchmark("naive", sync=False, file=None) as naive:
        fake_engine.queue(0.2)
    assert synced.elapsed >= 0.2
    assert naive.elapsed < 0.1, "sync=False must reproduce the book's naive timing"


def test_naive_benchmark_does_not_synchronize(fake_engine):
    with Benchmark(sync=False, file=None):
        pass
    assert fake_engine.calls == 0


@pytest.mark.parametrize("device", ["tpu", "cuda:7", "gpu0", 3.5])
def test_unknown_device_is_a_clear_error(device):
    with pytest.raises(ValueError, match="device"):
        Benchmark("x", device=device)


def test_exception_inside_block_propagates_and_prints_nothing():
    out = io.StringIO()
    with pytest.raises(ZeroDivisionError):
        with Benchmark("boom", file=out):
            1 / 0
    assert out.getvalue() == ""


def test_measure_keeps_raw_runs_and_summaries():
    calls = []
    m = measure(lambda: calls.append(1), warmup=2, repeat=7, label="noop")
    assert len(calls) == 9
    assert len(m.raw) == 7 and m.label == "noop"
    assert min(m.raw) <= m.median <= max(m.raw)
    assert m.iqr >= 0
    assert "noop" in repr(m) and "7 runs" in repr(m)


def test_measurement_summaries_are_exact():
    m = Measurement((1.0, 2.0, 3.0, 4.0, 100.0))
    assert m.median == 3.0
    assert m.iqr == pytest.approx(2.0)  # inclusive quartiles 2.0 and 4.0
    assert m.min == 1.0


@pytest.mark.parametrize("kwargs", [{"repeat": -1}, {"repeat": 0}, {"warmup": -2}, {"device": "nope"}])
def test_measure_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        measure(lambda: None, **kwargs)


def test_measure_rejects_non_callable():
    with pytest.raises(TypeError, match="callable"):
        measure(42)


def test_empty_measurement_is_an_error():
    with pytest.raises(ValueError):
        Measurement(())


def test_default_file_is_resolved_when_the_block_ends():
    # `file=sys.stdout` bound at import printed past redirect_stdout and %%capture
    import contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        with Benchmark("captured", sync=False):
            pass
    assert out.getvalue().startswith("captured: ")
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        with Benchmark("silent", sync=False, file=None):
            pass
    assert quiet.getvalue() == ""


def test_benchmark_inside_an_engine_op_raises_instead_of_hanging():
    # its synchronize() waited for the op it ran in
    from d2l_async.engine import EngineError, ThreadedEngine

    with ThreadedEngine() as eng:
        x = eng.array([1.0])

        def timed(t):
            with Benchmark("inside", file=None):
                t.add_(1)

        eng.push(timed, writes=(x,))
        with pytest.raises(EngineError, match="inside an op"):
            x.wait_to_read(timeout=10)


def test_benchmark_keeps_the_collector_out_of_the_timed_block():
    """a full collection inside a timed loop decided a verdict; the block runs with it off."""
    import gc

    from d2l_async.benchmark import Benchmark

    assert gc.isenabled()
    with Benchmark("x", sync=False, file=None):
        inside = gc.isenabled()
    assert inside is False and gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        with Benchmark("y", sync=False, file=None):
            1 / 0
    assert gc.isenabled()  # restored on the error path too


def test_time_runs_keeps_the_collector_off_while_timing():
    import gc

    from d2l_async.experiments._common import time_runs

    seen = []
    time_runs(lambda: seen.append(gc.isenabled()), warmup=1, repeat=2)
    assert seen == [True, False, False] and gc.isenabled()
