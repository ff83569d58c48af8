"""Operators behave as torch's do (issue 11, item 9): each case failed differently before."""

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
