"""The book's models, trained as people write it: losses and parameters
bitwise eager's.

Models: LeNet (lazy layers), a ResNet residual block (lazy, batch norm), an RNN and a GRU
language-model head, multi-head attention, a transformer encoder with and without a padding mask.
Optimizers: SGD with momentum, Adam, AdamW with ``foreach`` on and off -- each step with a
learning-rate scheduler and gradient clipping.  Models built inside the block, built outside and
used as they are, and through ``make_async``; 1 and 2 workers.

``make test`` runs one case per model (tiny sizes, 2 steps), rotating optimizer, build and
workers; ``HYPOTHESIS_PROFILE=slow`` runs the whole matrix (6 x 4 x 3 x 2 = 144 runs).
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from torch import nn

from d2l_async.torch_async import asynchronous, make_async

from .helpers import outcome, slow, train_steps


class Residual(nn.Module):  # d2l.Residual (the book's ResNet block, lazy layers)
    def __init__(self, channels: int, use_1x1conv: bool = True, strides: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.LazyConv2d(channels, 3, padding=1, stride=strides)
        self.conv2 = nn.LazyConv2d(channels, 3, padding=1)
        self.conv3 = nn.LazyConv2d(channels, 1, stride=strides) if use_1x1conv else None
        self.bn1, self.bn2 = nn.LazyBatchNorm2d(), nn.LazyBatchNorm2d()

    def forward(self, X):
        Y = torch.relu(self.bn1(self.conv1(X)))
        Y = self.bn2(self.conv2(Y))
        if self.conv3:
            X = self.conv3(X)
        return torch.relu(Y + X)


class RNNHead(nn.Module):
    def __init__(self, cell: type) -> None:
        super().__init__()
        self.rnn = cell(6, 8, batch_first=True)
        self.out = nn.Linear(8, 5)

    def forward(self, X):
        return self.out(self.rnn(X)[0][:, -1])


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, dropout=0.1, batch_first=True)
        self.out = nn.Linear(8, 5)

    def forward(self, X):
        return self.out(self.mha(X, X, X, need_weights=False)[0].mean(1))


class Encoder(nn.Module):
    def __init__(self, masked: bool) -> None:
        super().__init__()
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True), 2,
                                         enable_nested_tensor=False)
        self.out = nn.Linear(8, 5)
        self.masked = masked

    def forward(self, X):
        mask = None
        if self.masked:
            mask = torch.zeros(X.shape[0], X.shape[1], dtype=torch.bool)
            mask[0, -2:] = True
        return self.out(self.enc(X, src_key_padding_mask=mask).mean(1))


def _lenet():
    return nn.Sequential(nn.LazyConv2d(4, 5, padding=2), nn.Sigmoid(), nn.AvgPool2d(2, 2), nn.LazyConv2d(6, 5),
                         nn.Sigmoid(), nn.AvgPool2d(2, 2), nn.Flatten(), nn.LazyLinear(16), nn.Sigmoid(),
                         nn.LazyLinear(5))


MODELS = {
    "lenet": (_lenet, (3, 1, 16, 16)),
    "resnet-block": (lambda: nn.Sequential(Residual(4), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LazyLinear(5)),
                     (3, 2, 6, 6)),
    "rnn": (lambda: RNNHead(nn.RNN), (3, 4, 6)),
    "gru": (lambda: RNNHead(nn.GRU), (3, 4, 6)),
    "attention": (Attention, (3, 4, 8)),
    "encoder": (lambda: Encoder(False), (3, 4, 8)),
    "encoder-masked": (lambda: Encoder(True), (3, 4, 8)),
}
OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01),
    "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=0.01, foreach=True),
    "adamw-loop": lambda ps: torch.optim.AdamW(ps, lr=0.01, foreach=False),
}
BUILDS = ("inside", "outside", "make_async")


def _data(shape):
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, generator=g), torch.randint(0, 5, (shape[0],), generator=g)


def _build(model: str, X):
    torch.manual_seed(1)
    net = MODELS[model][0]()
    net(X)  # the book's dry run: lazy layers take their shapes
    return net


def _train(net, opt_name: str, X, y, steps: int = 2):
    opt = OPTIMIZERS[opt_name](net.parameters())
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, 0.5)
    torch.manual_seed(2)
    return outcome(train_steps(net, opt, X, y, steps, clip=1.0, sched=sched), net)


def _case(model: str, opt: str, build: str, workers: int) -> None:
    X, y = _data(MODELS[model][1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lazy modules' "under development" warning
        expected = _train(_build(model, X), opt, X, y)
        net = _build(model, X) if build != "inside" else None
        with asynchronous(workers=workers) as rt:
            if build == "inside":
                net = _build(model, X)
            elif build == "make_async":
                net = make_async(net)
            got = _train(net, opt, X, y)
    assert got[0] == expected[0], f"losses differ: {got[0]} vs {expected[0]}"
    assert got[1] == expected[1], "parameters differ"
    assert rt.statistics().failed == 0


FAST = [(m, o, b, w) for (m, (o, b, w)) in zip(MODELS, itertools.islice(
    itertools.cycle(zip(itertools.cycle(OPTIMIZERS), itertools.cycle(BUILDS), itertools.cycle((1, 2)))), len(MODELS)))]


@pytest.mark.parametrize("model,opt,build,workers", FAST)
def test_book_models_train_as_eager(model, opt, build, workers):
    _case(model, opt, build, workers)


@slow
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("opt", list(OPTIMIZERS))
@pytest.mark.parametrize("model", list(MODELS))
def test_book_models_full_matrix(model, opt, build, workers):
    _case(model, opt, build, workers)
