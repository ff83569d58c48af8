"""The book's own training order, through its classes (``book.py``: d2l's code): bitwise eager.

``d2l.Trainer.fit`` makes the optimizer (``configure_optimizers()``) before the first batch, over
lazy layers not yet initialized; ``d2l.Module.plot`` reads every loss (a blocking point per step,
as in the book).  Models built inside the block and outside it; 1 and 2 workers.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from d2l_async.torch_async import AsyncTensor, asynchronous

from . import book as d2l
from .helpers import run_isolated, slow


def _linear_regression(build_inside: bool, workers: int | None, epochs: int):
    """§3.5's cells (``max_epochs=3`` in the book): data, model, trainer, fit; the learned w and b."""
    def build():
        torch.manual_seed(0)
        model = d2l.LinearRegression(lr=0.03)
        data = d2l.SyntheticRegressionData(w=torch.tensor([2, -3.4]), b=4.2)
        return model, data

    def fit(model, data):
        trainer = d2l.Trainer(max_epochs=epochs)
        trainer.fit(model, data)
        w, b = model.get_w_b()
        return w.numpy().tobytes(), b.numpy().tobytes(), type(model.net.weight), model.board.data["train_loss"]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lazy modules' "under development" warning
        if workers is None:
            return fit(*build())
        parts = None if build_inside else build()
        with asynchronous(workers=workers):
            return fit(*(build() if build_inside else parts))


def _check_linear_regression(build_inside: bool, workers: int, epochs: int) -> None:
    expected = _linear_regression(build_inside, None, epochs)
    got = _linear_regression(build_inside, workers, epochs)
    assert got[0] == expected[0] and got[1] == expected[1], "w, b differ from eager's"
    assert got[3] == expected[3], "the losses the board drew differ"
    assert got[2] is AsyncTensor
    w = torch.frombuffer(bytearray(got[0]), dtype=torch.float32)
    assert torch.allclose(w, torch.tensor([2, -3.4]), atol=0.5 if epochs == 1 else 0.05)  # it learned


@pytest.mark.parametrize("build_inside,workers", [(True, 1), (False, 2)], ids=["built inside", "built outside"])
def test_linear_regression_of_section_3_5_trains_as_eager(build_inside, workers):
    _check_linear_regression(build_inside, workers, epochs=1)


@slow
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("build_inside", [True, False], ids=["built inside", "built outside"])
def test_linear_regression_of_section_3_5_three_epochs(build_inside, workers):
    _check_linear_regression(build_inside, workers, epochs=3)


def _lstm_language_model(build_inside: bool, workers: int | None):
    """§10.1.3's concise LSTM (``d2l.RNNLM`` over ``nn.LSTM``, gradient clipping 1, lr 4), on
    random tokens shaped as The Time Machine's, smaller (the book: batch 1024, 32 steps, 50 epochs)."""
    def build():
        torch.manual_seed(0)
        data = d2l.TokenData(batch_size=16, num_steps=8)
        lstm = d2l.LSTM(num_inputs=data.vocab_size, num_hiddens=32)
        return d2l.RNNLM(lstm, vocab_size=data.vocab_size, lr=4), data

    def fit(model, data):
        torch.manual_seed(1)  # the loader's shuffle
        d2l.Trainer(max_epochs=1, gradient_clip_val=1).fit(model, data)
        return ([p.detach().numpy().tobytes() for p in model.parameters()], model.board.data,
                {type(p) for p in model.parameters()})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if workers is None:
            return fit(*build())
        parts = None if build_inside else build()
        with asynchronous(workers=workers):
            return fit(*(build() if build_inside else parts))


@pytest.mark.parametrize("build_inside,workers", [(True, 2), (False, 1)], ids=["built inside", "built outside"])
def test_the_book_lstm_language_model_trains_as_eager(build_inside, workers):
    expected = _lstm_language_model(build_inside, None)
    got = _lstm_language_model(build_inside, workers)
    assert got[1] == expected[1], "the perplexities the board drew differ"
    assert got[0] == expected[0], "parameters differ"
    # built outside, the LSTM's parameters are used as they are (plain); the lazy head is made inside
    assert got[2] == ({AsyncTensor} if build_inside else {torch.nn.Parameter, AsyncTensor})


def test_softmax_regression_over_the_books_four_loader_workers_trains_as_eager():
    """§4.5's softmax regression on §4.2's Fashion-MNIST loader: ``DataModule``'s default
    ``num_workers=4`` forks four worker processes per epoch and split (a fresh interpreter: a
    hang fails the test instead of the run)."""
    out = run_isolated("""
        import json, warnings, torch
        from d2l_async.torch_async import asynchronous
        from tests.torch_async import book as d2l
        warnings.simplefilter("ignore")

        def fit():
            torch.manual_seed(0)
            data = d2l.FashionMNIST(batch_size=64)
            model = d2l.SoftmaxRegression(num_outputs=10, lr=0.1)
            d2l.Trainer(max_epochs=1).fit(model, data)
            return [p.detach().numpy().tobytes().hex() for p in model.parameters()], model.board.data
        expected = fit()
        with asynchronous():
            got = fit()
        print(json.dumps({"parameters": got[0] == expected[0], "board": got[1] == expected[1]}))
    """, timeout=180)
    assert json.loads(out.strip().splitlines()[-1]) == {"parameters": True, "board": True}
