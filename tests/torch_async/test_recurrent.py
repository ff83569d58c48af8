"""Recurrent layers and sequence losses as people use them, bitwise eager's.

``nn.LSTM`` on a CPU runs oneDNN's ``mkldnn_rnn_layer``, whose workspace only the kernel can size
(its meta kernel promises 0 bytes); a ``PackedSequence``'s ``batch_sizes`` and ``CTCLoss``'s
lengths are read by C++ from memory before any op is dispatched.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from d2l_async.torch_async import asynchronous
from d2l_async.torch_async._runtime import CACHE

from .helpers import blocks

LEARN = "output sizes known only at run time: mkldnn_rnn_layer"


def _bits(*tensors) -> list:
    return [None if t is None else (t.dtype, tuple(t.shape), t.detach().numpy().tobytes()) for t in tensors]


def _lstm_run(layers: int, mode: str, bidirectional: bool = False, steps: int = 2) -> list:
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 8, num_layers=layers, bidirectional=bidirectional)
    X = torch.randn(5, 3, 4)
    if mode == "eval":
        lstm.eval()
    out = []
    for _ in range(steps):
        if mode == "no_grad":
            with torch.no_grad():
                y, (h, c) = lstm(X)
            out += _bits(y, h, c)
        else:
            lstm.zero_grad()
            y, (h, c) = lstm(X)
            (y.sum() + h.pow(2).sum()).backward()
            out += _bits(y, h, c, *(p.grad for p in lstm.parameters()))
    return out


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("mode", ["train", "eval", "no_grad"])
@pytest.mark.parametrize("layers", [1, 2])
def test_lstm_forward_and_backward_equal_eager(layers, mode, workers, monkeypatch):
    expected = _lstm_run(layers, mode)
    monkeypatch.setattr(CACHE, "entries", {})  # nothing learned yet
    with asynchronous(workers=workers) as rt:
        got = _lstm_run(layers, mode)
    assert got == expected
    assert rt.statistics().failed == 0
    # the workspace's size is learned once per layer shape (a recorded blocking point); the second
    # step's forwards are queued with the right promise
    assert [r for r, _ in blocks(rt)].count(LEARN) == layers


def test_bidirectional_lstm_equals_eager():
    expected = _lstm_run(2, "train", bidirectional=True)
    with asynchronous(workers=2):
        got = _lstm_run(2, "train", bidirectional=True)
    assert got == expected


def _packed_run() -> list:
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 8)
    X = torch.randn(6, 3, 4, requires_grad=True)
    packed = pack_padded_sequence(X, [6, 4, 2])
    out, (h, c) = lstm(packed)
    y, lengths = pad_packed_sequence(out, total_length=7)
    (y.sum() + h.sum()).backward()
    return [*_bits(y, h, c, X.grad, *(p.grad for p in lstm.parameters())), lengths.tolist(),
            packed.batch_sizes.tolist()]


@pytest.mark.parametrize("workers", [1, 2])
def test_packed_sequences_through_an_lstm_equal_eager(workers):
    expected = _packed_run()
    with asynchronous(workers=workers) as rt:
        got = _packed_run()
    assert got == expected
    assert rt.statistics().failed == 0


@pytest.mark.parametrize("lengths", ["lists", "tensors made inside", "tensors made outside"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_ctc_loss_equals_eager(lengths, reduction):
    outside = (torch.tensor([10, 8]), torch.tensor([4, 3]))

    def run():
        torch.manual_seed(0)
        log_probs = torch.randn(10, 2, 5).log_softmax(2).detach().requires_grad_()
        targets = torch.randint(1, 5, (2, 4))
        if lengths == "lists":
            il, tl = [10, 8], [4, 3]
        elif lengths == "tensors made inside":
            il, tl = torch.tensor([10, 8]), torch.tensor([4, 3], dtype=torch.int32)
        else:
            il, tl = outside
        loss = nn.CTCLoss(reduction=reduction)(log_probs, targets, il, tl)
        loss.backward()
        return _bits(loss, log_probs.grad)
    expected = run()
    with asynchronous():
        got = run()
    assert got == expected
