from __future__ import annotations

import numpy as np
import pytest

from d2l_async.experiments import run_asynchrony
from d2l_async.trace import BACKEND_KINDS


@pytest.fixture(scope="module")
def result():
    import os

    os.environ["D2L_ASYNC_QUICK"] = "1"
    try:
        return run_asynchrony(size=200, matmuls=4, repeat=2, backend="engine")
    finally:
        os.environ.pop("D2L_ASYNC_QUICK", None)


def test_one_backend_op_per_push(result):
    t = result.trace
    launches = t.where(kind="launch")
    work = t.where(kind=BACKEND_KINDS)
    assert len(launches) == len(work) == 2 * result.matmuls  # normal_ + matmul per product
    # every op started after the frontend issued it
    assert np.all(work["start"] >= work["issue"])


def test_measurements_are_labelled_and_honest(result):
    assert result.naive.synchronized is False and result.synced.synchronized is True
    assert len(result.numpy.raw) == len(result.synced.raw) == 2
    assert list(result.measurements) == ["numpy", result.naive.label, result.synced.label]
    assert result.virtual and "virtual" in result.device
    assert result.trace.is_virtual


def test_naive_timer_misses_the_work(result):
    # the naive timer stops before the queue drains; the synchronized one waits for it
    assert result.naive.median < result.synced.median
    assert 0 < result.hidden_fraction <= 1


@pytest.mark.parametrize("kwargs", [{"size": 0}, {"matmuls": -1}, {"repeat": 0}, {"size": 2.5},
                                    {"backend": "gpu"}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        run_asynchrony(**kwargs)


def test_keyword_only():
    with pytest.raises(TypeError):
        run_asynchrony(100)  # noqa
