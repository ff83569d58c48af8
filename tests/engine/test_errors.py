"""Deferred errors: raised at the blocker, with the original type and traceback chained."""

from __future__ import annotations

import traceback

import pytest
import torch

from d2l_async.engine import EngineError, NaiveEngine, ThreadedEngine

WAIT = 10.0


def fail_with(exc):
    def broken_op(*tensors):
        raise exc
    return broken_op


@pytest.fixture(params=["threaded", "naive"])
def eng(request):
    e = ThreadedEngine(workers=2) if request.param == "threaded" else NaiveEngine()
    yield e
    e.shutdown(wait=False, timeout=5)


def test_error_is_deferred_to_the_blocker_with_type_and_chained_traceback(eng):
    x = eng.array([1.0, 2.0], name="x")
    eng.push(fail_with(KeyError("missing")), writes=(x,), name="broken")  # push itself does not raise
    with pytest.raises(KeyError) as info:
        x.wait_to_read(timeout=WAIT)
    err = info.value
    assert err.args == ("missing",)
    assert isinstance(err.__cause__, KeyError)
    frames = [f.name for f in traceback.extract_tb(err.__cause__.__traceback__)]
    assert "broken_op" in frames  # the worker's traceback survives
    assert any("broken" in n for n in err.__notes__)


def test_error_reaches_anything_computed_from_it_but_not_unrelated_arrays(eng):
    x = eng.array([1.0], name="x")
    ok = eng.array([3.0], name="ok")
    eng.push(fail_with(ValueError("bad")), writes=(x,))
    y = x + 1
    z = (y * 2).to(eng.devices[0])
    w = ok * 2
    for blocker in (lambda: y.asnumpy(), lambda: z.item(), lambda: float(z), lambda: print(y)):
        with pytest.raises(ValueError, match="bad"):
            blocker()
    assert w.item() == 6.0
    eng.waitall(timeout=WAIT)  # already raised at the blockers: not again (defect 10)


def test_waitall_raises_once_and_the_engine_stays_usable(eng):
    x = eng.array([1.0])
    eng.push(fail_with(ZeroDivisionError("z")), writes=(x,))
    with pytest.raises(ZeroDivisionError):
        eng.waitall(timeout=WAIT)
    eng.waitall(timeout=WAIT)  # reported already: no second raise
    y = eng.array([2.0]) + 1
    assert y.item() == 3.0
    assert eng.statistics().failed == 1
    with pytest.raises(ZeroDivisionError):  # the array itself stays broken
        x.asnumpy()


def test_waitall_reports_how_many_failed(eng):
    a, b = eng.array([1.0]), eng.array([1.0])
    eng.push(fail_with(RuntimeError("one")), writes=(a,))
    eng.push(fail_with(RuntimeError("two")), writes=(b,))
    with pytest.raises(RuntimeError, match="one") as info:
        eng.waitall(timeout=WAIT)
    assert any("1 more ops failed" in n for n in info.value.__notes__)


def test_shape_errors_surface_at_the_push_like_eager_torch(eng):
    a, b = eng.array(torch.ones(2, 3)), eng.array(torch.ones(4))
    with pytest.raises(RuntimeError):
        a + b
    with pytest.raises(RuntimeError):
        a @ a
    i = eng.array(torch.ones(2, dtype=torch.int64))
    with pytest.raises(RuntimeError):
        i += 1.5
    with pytest.raises(RuntimeError):
        i ** -1
    eng.waitall(timeout=WAIT)  # nothing was pushed, nothing is left to raise


def test_uncopyable_exception_becomes_engine_error(eng):
    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a}/{b}")

    x, y = eng.array([1.0]), eng.array([1.0])
    eng.push(fail_with(Odd(1, 2)), writes=(x,))
    eng.push(fail_with(Odd(3, 4)), writes=(y,))  # nobody waits for y: waitall raises it
    with pytest.raises((Odd, EngineError)) as info:
        x.wait_to_read(timeout=WAIT)
    assert isinstance(info.value.__cause__, Odd)
    with pytest.raises((Odd, EngineError), match="3/4"):
        eng.waitall(timeout=WAIT)


def test_with_block_raises_errors_nobody_waited_for():
    with pytest.raises(ValueError, match="never seen"):
        with ThreadedEngine() as eng:
            x = eng.array([1.0])
            eng.push(fail_with(ValueError("never seen")), writes=(x,))


def test_with_block_does_not_mask_the_body_exception():
    with pytest.raises(LookupError):
        with ThreadedEngine() as eng:
            x = eng.array([1.0])
            eng.push(fail_with(ValueError("engine")), writes=(x,))
            raise LookupError("body")
