from __future__ import annotations

import numpy as np
import pytest

from d2l_async.experiments import BOOK, book_number, resolve_backend
from d2l_async.experiments._common import positive_int, positive_ints, stable_matrix

from .conftest import cuda_available


def test_engine_backend_is_labelled_virtual():
    s = resolve_backend("engine", n_devices=2)
    assert s.backend == "engine" and s.virtual
    assert "virtual" in s.device and "2 virtual devices" in s.device
    assert "GPU" not in s.device and "cuda" not in s.device


def test_auto_without_cuda_is_the_engine():
    s = resolve_backend("auto")
    assert s.backend == ("cuda" if cuda_available() else "engine")
    assert s.virtual is (s.backend == "engine")


@pytest.mark.parametrize("bad", ["tpu", "", "CUDA", None, 3])
def test_unknown_backend(bad):
    with pytest.raises(ValueError, match="backend="):
        resolve_backend(bad)


@pytest.mark.skipif(cuda_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_names_the_fix():
    with pytest.raises(ValueError, match="backend='engine'"):
        resolve_backend("cuda")


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True, None])
def test_positive_int_rejects(bad):
    with pytest.raises(ValueError, match="size"):
        positive_int("size", bad)


def test_positive_int_accepts_numpy_ints_and_bounds():
    assert positive_int("n", np.int64(5)) == 5
    with pytest.raises(ValueError, match="between 1 and 4"):
        positive_int("n", 5, maximum=4)
    with pytest.raises(ValueError, match="must not be empty"):
        positive_ints("workers", ())
    with pytest.raises(ValueError, match="sequence"):
        positive_ints("workers", "12")


def test_stable_matrix_rows_sum_to_one_and_chains_stay_bounded():
    import torch

    m = stable_matrix(50)
    assert torch.allclose(m.sum(dim=1), torch.ones(50))
    a = torch.ones(50, 50)
    for _ in range(500):
        a = a @ m
    assert torch.isfinite(a).all() and a.min() > 0.5 and a.max() < 2  # no decay to denormals


def test_book_numbers_are_the_books_and_say_so():
    assert BOOK["sync_async.sync"].value == 3.16 and BOOK["sync_async.async"].value == 0.93
    assert BOOK["blockers.asnumpy"].value == 0.0340 and BOOK["blockers.item"].value == 0.0445
    for n in BOOK.values():
        assert "§13.2" in n.source and ("MXNet" in n.source or "no measurement" in n.source)
        assert n.label.startswith("the book's")
    with pytest.raises(TypeError):
        BOOK["x"] = 1  # read-only
    with pytest.raises(ValueError, match="known"):
        book_number("nope")
