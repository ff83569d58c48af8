"""The book's training classes, as the ``d2l`` package (1.0.3, ``d2l/torch.py``) defines them.

*Dive into Deep Learning* (https://d2l.ai) trains every model of its PyTorch edition through these
few classes, in one order: ``Trainer.fit`` calls ``model.configure_optimizers()`` *before* the
first batch, and the concise models use lazy layers (``nn.LazyLinear``), so the optimizer is made
over parameters that do not exist yet (§3.2, "Object-Oriented Design for Implementation").  The
``d2l`` package itself pins an old torch and imports torchvision, matplotlib and IPython, so the
tests use this copy: the book's code line for line, with the plotting left out (``ProgressBoard``
records the points it would draw, as the book's own ``display=False`` does) and ``d2l.*`` aliases
written out.  Each class names its section.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn
from torch.nn import functional as F


class HyperParameters:  # §3.2.1 (sec_oo-design), save_hyperparameters from §B (sec_utils)
    def save_hyperparameters(self, ignore=[]):  # noqa: B006 - the book's signature
        frame = inspect.currentframe().f_back
        _, _, _, local_vars = inspect.getargvalues(frame)
        self.hparams = {k: v for k, v in local_vars.items()
                        if k not in set(ignore + ['self']) and not k.startswith('_')}
        for k, v in self.hparams.items():
            setattr(self, k, v)


class ProgressBoard(HyperParameters):  # §3.2.1; draw as d2l's with display=False: no figure
    def __init__(self, xlabel=None, ylabel=None, xlim=None, ylim=None, xscale='linear', yscale='linear',
                 ls=['-', '--', '-.', ':'], colors=['C0', 'C1', 'C2', 'C3'], fig=None, axes=None,  # noqa: B006
                 figsize=(3.5, 2.5), display=False):
        self.save_hyperparameters()

    def draw(self, x, y, label, every_n=1):
        if not hasattr(self, 'raw_points'):
            self.raw_points, self.data = {}, {}
        if label not in self.raw_points:
            self.raw_points[label], self.data[label] = [], []
        points, line = self.raw_points[label], self.data[label]
        points.append((x, y))
        if len(points) != every_n:
            return
        line.append((sum(p[0] for p in points) / len(points), sum(p[1] for p in points) / len(points)))
        points.clear()


class Module(nn.Module, HyperParameters):  # §3.2.2 (sec_oo-design)
    def __init__(self, plot_train_per_epoch=2, plot_valid_per_epoch=1):
        super().__init__()
        self.save_hyperparameters()
        self.board = ProgressBoard()

    def loss(self, y_hat, y):
        raise NotImplementedError

    def forward(self, X):
        assert hasattr(self, 'net'), 'Neural network is defined'
        return self.net(X)

    def plot(self, key, value, train):
        assert hasattr(self, 'trainer'), 'Trainer is not inited'
        self.board.xlabel = 'epoch'
        if train:
            x = self.trainer.train_batch_idx / self.trainer.num_train_batches
            n = self.trainer.num_train_batches / self.plot_train_per_epoch
        else:
            x = self.trainer.epoch + 1
            n = self.trainer.num_val_batches / self.plot_valid_per_epoch
        # d2l.numpy(d2l.to(value, d2l.cpu())): the book reads every loss (a blocking point)
        self.board.draw(x, value.to(torch.device('cpu')).detach().numpy(),
                        ('train_' if train else 'val_') + key, every_n=int(n))

    def training_step(self, batch):
        l = self.loss(self(*batch[:-1]), batch[-1])  # noqa: E741 - the book's name
        self.plot('loss', l, train=True)
        return l

    def validation_step(self, batch):
        l = self.loss(self(*batch[:-1]), batch[-1])  # noqa: E741
        self.plot('loss', l, train=False)

    def configure_optimizers(self):  # §4.3 (sec_classification)
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class DataModule(HyperParameters):  # §3.2.3 (subsec_oo-design-models)
    def __init__(self, root='../data', num_workers=4):
        self.save_hyperparameters()

    def get_dataloader(self, train):
        raise NotImplementedError

    def train_dataloader(self):
        return self.get_dataloader(train=True)

    def val_dataloader(self):
        return self.get_dataloader(train=False)

    def get_tensorloader(self, tensors, train, indices=slice(0, None)):  # §3.3 (sec_synthetic-regression-data)
        tensors = tuple(a[indices] for a in tensors)
        dataset = torch.utils.data.TensorDataset(*tensors)
        return torch.utils.data.DataLoader(dataset, self.batch_size, shuffle=train)


class Trainer(HyperParameters):  # §3.2.4 (subsec_oo-design-models), §3.4 fit_epoch, §6.7 GPUs (none here)
    def __init__(self, max_epochs, num_gpus=0, gradient_clip_val=0):
        self.save_hyperparameters()
        self.gpus = []

    def prepare_data(self, data):
        self.train_dataloader = data.train_dataloader()
        self.val_dataloader = data.val_dataloader()
        self.num_train_batches = len(self.train_dataloader)
        self.num_val_batches = (len(self.val_dataloader) if self.val_dataloader is not None else 0)

    def prepare_model(self, model):
        model.trainer = self
        model.board.xlim = [0, self.max_epochs]
        self.model = model

    def fit(self, model, data):
        self.prepare_data(data)
        self.prepare_model(model)
        self.optim = model.configure_optimizers()  # before any batch: lazy layers are not initialized yet
        self.epoch = 0
        self.train_batch_idx = 0
        self.val_batch_idx = 0
        for self.epoch in range(self.max_epochs):
            self.fit_epoch()

    def prepare_batch(self, batch):
        return batch

    def fit_epoch(self):  # §3.4 (sec_linear_scratch)
        self.model.train()
        for batch in self.train_dataloader:
            loss = self.model.training_step(self.prepare_batch(batch))
            self.optim.zero_grad()
            with torch.no_grad():
                loss.backward()
                if self.gradient_clip_val > 0:
                    self.clip_gradients(self.gradient_clip_val, self.model)
                self.optim.step()
            self.train_batch_idx += 1
        if self.val_dataloader is None:
            return
        self.model.eval()
        for batch in self.val_dataloader:
            with torch.no_grad():
                self.model.validation_step(self.prepare_batch(batch))
            self.val_batch_idx += 1

    def clip_gradients(self, grad_clip_val, model):  # §9.5 (sec_rnn-scratch)
        params = [p for p in model.parameters() if p.requires_grad]
        norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
        if norm > grad_clip_val:
            for param in params:
                param.grad[:] *= grad_clip_val / norm


class SyntheticRegressionData(DataModule):  # §3.3 (sec_synthetic-regression-data)
    def __init__(self, w, b, noise=0.01, num_train=1000, num_val=1000, batch_size=32):
        super().__init__()
        self.save_hyperparameters()
        n = num_train + num_val
        self.X = torch.randn(n, len(w))
        noise = torch.randn(n, 1) * noise
        self.y = torch.matmul(self.X, w.reshape((-1, 1))) + b + noise

    def get_dataloader(self, train):
        i = slice(0, self.num_train) if train else slice(self.num_train, None)
        return self.get_tensorloader((self.X, self.y), train, i)


class LinearRegression(Module):  # §3.5 (sec_linear_concise)
    def __init__(self, lr):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.LazyLinear(1)
        self.net.weight.data.normal_(0, 0.01)
        self.net.bias.data.fill_(0)

    def forward(self, X):
        return self.net(X)

    def loss(self, y_hat, y):
        fn = nn.MSELoss()
        return fn(y_hat, y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), self.lr)

    def get_w_b(self):
        return (self.net.weight.data, self.net.bias.data)


class Classifier(Module):  # §4.3 (sec_classification)
    def validation_step(self, batch):
        Y_hat = self(*batch[:-1])
        self.plot('loss', self.loss(Y_hat, batch[-1]), train=False)
        self.plot('acc', self.accuracy(Y_hat, batch[-1]), train=False)

    def accuracy(self, Y_hat, Y, averaged=True):
        Y_hat = Y_hat.reshape((-1, Y_hat.shape[-1]))
        preds = Y_hat.argmax(axis=1).type(Y.dtype)
        compare = (preds == Y.reshape(-1)).type(torch.float32)
        return compare.mean() if averaged else compare

    def loss(self, Y_hat, Y, averaged=True):  # §4.5 (sec_softmax_concise)
        Y_hat = Y_hat.reshape((-1, Y_hat.shape[-1]))
        Y = Y.reshape((-1,))
        return F.cross_entropy(Y_hat, Y, reduction='mean' if averaged else 'none')


class SoftmaxRegression(Classifier):  # §4.5 (sec_softmax_concise)
    def __init__(self, num_outputs, lr):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Flatten(), nn.LazyLinear(num_outputs))

    def forward(self, X):
        return self.net(X)


class RNNLMScratch(Classifier):  # §9.5 (sec_rnn-scratch)
    def __init__(self, rnn, vocab_size, lr=0.01):
        super().__init__()
        self.save_hyperparameters()
        self.init_params()

    def init_params(self):
        self.W_hq = nn.Parameter(torch.randn(self.rnn.num_hiddens, self.vocab_size) * self.rnn.sigma)
        self.b_q = nn.Parameter(torch.zeros(self.vocab_size))

    def training_step(self, batch):
        l = self.loss(self(*batch[:-1]), batch[-1])  # noqa: E741
        self.plot('ppl', torch.exp(l), train=True)
        return l

    def validation_step(self, batch):
        l = self.loss(self(*batch[:-1]), batch[-1])  # noqa: E741
        self.plot('ppl', torch.exp(l), train=False)

    def one_hot(self, X):
        return F.one_hot(X.T, self.vocab_size).type(torch.float32)

    def output_layer(self, rnn_outputs):
        outputs = [torch.matmul(H, self.W_hq) + self.b_q for H in rnn_outputs]
        return torch.stack(outputs, 1)

    def forward(self, X, state=None):
        embs = self.one_hot(X)
        rnn_outputs, _ = self.rnn(embs, state)
        return self.output_layer(rnn_outputs)


class RNN(Module):  # §9.6 (sec_rnn-concise)
    def __init__(self, num_inputs, num_hiddens):
        super().__init__()
        self.save_hyperparameters()
        self.rnn = nn.RNN(num_inputs, num_hiddens)

    def forward(self, inputs, H=None):
        return self.rnn(inputs, H)


class RNNLM(RNNLMScratch):  # §9.6 (sec_rnn-concise)
    def init_params(self):
        self.linear = nn.LazyLinear(self.vocab_size)

    def output_layer(self, hiddens):
        return self.linear(hiddens).swapaxes(0, 1)


class LSTM(RNN):  # §10.1.3 (sec_lstm), defined in the chapter's notebook
    def __init__(self, num_inputs, num_hiddens):
        Module.__init__(self)
        self.save_hyperparameters()
        self.rnn = nn.LSTM(num_inputs, num_hiddens)

    def forward(self, inputs, H_C=None):
        return self.rnn(inputs, H_C)


class GRU(RNN):  # §10.3 (sec_deep_rnn)
    def __init__(self, num_inputs, num_hiddens, num_layers, dropout=0):
        Module.__init__(self)
        self.save_hyperparameters()
        self.rnn = nn.GRU(num_inputs, num_hiddens, num_layers, dropout=dropout)


class TokenData(DataModule):
    """Random token sequences shaped as §9.3's ``TimeMachine`` gives them (``X``, ``Y`` shifted by
    one), with its ``get_dataloader``: the book downloads *The Time Machine*; a test cannot."""

    def __init__(self, batch_size, num_steps, vocab_size=28, num_train=64, num_val=32, num_workers=4):
        super().__init__(num_workers=num_workers)
        self.save_hyperparameters()
        g = torch.Generator().manual_seed(0)
        array = torch.randint(0, vocab_size, (num_train + num_val, num_steps + 1), generator=g)
        self.X, self.Y = array[:, :-1], array[:, 1:]

    def get_dataloader(self, train):
        idx = slice(0, self.num_train) if train else slice(self.num_train, self.num_train + self.num_val)
        return self.get_tensorloader([self.X, self.Y], train, idx)


class FashionMNIST(DataModule):
    """§4.2's ``FashionMNIST`` (sec_fashion_mnist) with its ``get_dataloader`` -- worker processes
    (``DataModule``'s default ``num_workers=4``) -- over random 28 x 28 images: the book downloads
    Fashion-MNIST through torchvision; a test cannot."""

    def __init__(self, batch_size=64, resize=(28, 28), num_train=256, num_val=128, num_workers=4):
        super().__init__(num_workers=num_workers)
        self.save_hyperparameters()
        g = torch.Generator().manual_seed(0)

        def images(n):
            return torch.utils.data.TensorDataset(torch.rand(n, 1, *resize, generator=g),
                                                  torch.randint(0, 10, (n,), generator=g))
        self.train, self.val = images(num_train), images(num_val)

    def get_dataloader(self, train):
        data = self.train if train else self.val
        return torch.utils.data.DataLoader(data, self.batch_size, shuffle=train, num_workers=self.num_workers)


def init_cnn(module):  # §7.6 (sec_lenet)
    if type(module) == nn.Linear or type(module) == nn.Conv2d:  # noqa: E721 - the book's test
        nn.init.xavier_uniform_(module.weight)


class LeNet(Classifier):  # §7.6 (sec_lenet)
    def __init__(self, lr=0.1, num_classes=10):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.LazyConv2d(6, kernel_size=5, padding=2), nn.Sigmoid(),
            nn.AvgPool2d(kernel_size=2, stride=2),
            nn.LazyConv2d(16, kernel_size=5), nn.Sigmoid(),
            nn.AvgPool2d(kernel_size=2, stride=2),
            nn.Flatten(),
            nn.LazyLinear(120), nn.Sigmoid(),
            nn.LazyLinear(84), nn.Sigmoid(),
            nn.LazyLinear(num_classes))
