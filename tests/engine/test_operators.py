"""Operators behave as torch's do: each case failed differently before."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from d2l_async.engine import NaiveEngine, ThreadedEngine

WAIT = 10.0


@pytest.fixture(params=["threaded", "naive"])
def eng(request):
    e = ThreadedEngine(workers=2) if request.param == "threaded" else NaiveEngine()
    yield e
    e.shutdown(wait=False, timeout=5)


def same(engine_value, eager_value):
    got = engine_value.asnumpy() if hasattr(engine_value, "asnumpy") else engine_value
    want = eager_value.numpy() if isinstance(eager_value, torch.Tensor) else eager_value
    assert np.array_equal(got, want) and np.asarray(got).dtype == np.asarray(want).dtype


@pytest.mark.parametrize("expr", ["a @ 2", "2 @ a", "a @ 2.5"])
def test_matmul_with_a_scalar_is_a_type_error_as_in_torch(eng, expr):
    with pytest.raises(TypeError, match="unsupported operand"):
        eval(expr, {"a": torch.ones(3)})
    with pytest.raises(TypeError, match="unsupported operand"):
        eval(expr, {"a": eng.array(torch.ones(3))})


@pytest.mark.parametrize("scalar", [np.float64(2), np.float32(0.5), np.int64(3), np.bool_(True)])
def test_numpy_scalars_are_scalars_on_either_side(eng, scalar):
    t = torch.arange(3, dtype=torch.float32)
    a = eng.array(t)
    for op in (lambda x: x + scalar, lambda x: scalar + x, lambda x: scalar * x, lambda x: x - scalar,
               lambda x: scalar < x):
        out = op(a)
        assert type(out).__name__ == "EngineArray"  # not a numpy array made through a hidden blocker
        same(out, op(t))


def test_comparisons_are_elementwise_ops(eng):
    t, u = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 2.0, 1.0])
    a, b = eng.array(t), eng.array(u)
    for op in (lambda x, y: x == y, lambda x, y: x != y, lambda x, y: x < y, lambda x, y: x <= y,
               lambda x, y: x > y, lambda x, y: x >= y, lambda x, y: x == 2, lambda x, y: 2 > x):
        same(op(a, b), op(t, u))
    assert (a == None) is False and (a != "x") is True  # noqa: E711 - as torch: not comparable
    assert len({a, b, a}) == 2  # still hashable, by identity


def test_format_follows_torch(eng):
    z, v = torch.tensor(3.0), torch.ones(2)
    assert f"{eng.array(z)}" == f"{z}" == "3.0"
    assert f"{eng.array(z):.2f}" == f"{z:.2f}"
    assert f"{eng.array(v)}" == f"{v}"
    with pytest.raises(TypeError):
        f"{eng.array(v):.2f}"


def test_complex_exponents(eng):
    t = torch.tensor([1.0, 2.0])
    same(eng.array(t) ** 1j, t ** 1j)
    same(1j ** eng.array(t), 1j ** t)


# -- copies, pickling, ndarray operands ------------------------------------------------
def test_copy_and_deepcopy_give_a_new_array_with_the_same_value():
    import copy
    import threading

    from d2l_async.engine import ThreadedEngine

    gate = threading.Event()
    with ThreadedEngine() as eng:
        x = eng.array([1.0, 2.0], name="x")
        eng.push(lambda t: (gate.wait(10), t.add_(1)), writes=(x,))  # x is still being computed
        y, z = copy.copy(x), copy.deepcopy(x)  # pushed copies: no wait, no AttributeError
        gate.set()
        x += 10
        assert y is not x and z is not x and y._engine is eng
        assert y.asnumpy().tolist() == z.asnumpy().tolist() == [2.0, 3.0]  # x's value when copied
        assert x.asnumpy().tolist() == [12.0, 13.0]
    with pytest.raises(TypeError, match="shut down"):
        copy.copy(x)


def test_pickling_an_array_says_why_not():
    import pickle

    from d2l_async.engine import NaiveEngine

    with NaiveEngine() as eng:
        x = eng.array([1.0])
        with pytest.raises(TypeError, match="cannot be pickled.*asnumpy"):
            pickle.dumps(x)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "matmul", "pow", "eq"])
def test_an_ndarray_operand_follows_torch(op):
    import operator
    import warnings

    import numpy as np
    import torch

    from d2l_async.engine import EngineArray, ThreadedEngine

    a = np.array([0.5, 2.0, 3.0])
    t = torch.tensor([1.0, 2.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # numpy 2 on torch's __array_wrap__
        want = getattr(operator, op)(t, a)
        with ThreadedEngine() as eng:
            x = eng.array(t)
            if not isinstance(want, torch.Tensor):  # torch 2.3 under numpy 2.4: `tensor == ndarray` is
                # numpy's answer, a Python bool; the engine says what to do instead of a bare AttributeError
                with pytest.raises(TypeError, match="convert the ndarray with torch.as_tensor"):
                    getattr(operator, op)(x, a)
                return
            got = getattr(operator, op)(x, a)
            assert isinstance(got, EngineArray) and isinstance(want, torch.Tensor)  # not an ndarray
            assert got.dtype == want.dtype and got.shape == want.shape
            assert torch.equal(torch.as_tensor(got.asnumpy()), want)  # bitwise


def test_in_place_with_an_ndarray_rebinds_as_torch_does():
    import warnings

    import numpy as np
    import torch

    from d2l_async.engine import NaiveEngine

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        t = torch.tensor([1.0, 2.0])
        t += np.array([1.0, 1.0])  # torch: the dunder declines, so t = t + a (float64)
        with NaiveEngine() as eng:
            x = eng.array([1.0, 2.0])
            x0 = x
            x += np.array([1.0, 1.0])
            assert x is not x0 and x.dtype == t.dtype == torch.float64
            assert x.asnumpy().tolist() == t.tolist() and x0.asnumpy().tolist() == [1.0, 2.0]


def test_an_op_that_gives_no_tensor_is_a_clear_type_error(monkeypatch, eng):
    """On torch 2.3.1 with numpy 2.4, ``tensor == ndarray`` returns a Python bool; the array op then
    raised a bare AttributeError ('bool' object has no attribute 'shape').  Staged here with an op that
    answers a bool, as that torch does."""
    import operator

    from d2l_async.engine import _array

    monkeypatch.setattr(_array, "_INFER", {})
    x = eng.array(torch.ones(3))
    with pytest.raises(TypeError, match=r"gives a bool, not a tensor.*torch.as_tensor"):
        _array._infer(("staged",), lambda a, b: bool(operator.eq(a.sum(), 3)), x, np.ones(3))
