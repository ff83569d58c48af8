"""``copy.deepcopy`` inside a block of tensors and models made outside it: EMA teachers
(``torch.optim.swa_utils.AveragedModel``), target networks, batch norm's buffers -- eager's values.

torch's own ``Tensor.__deepcopy__`` copies the storage and then calls ``new_empty``, which a block
answers with an asynchronous tensor; the copy is asynchronous (made in the block), and equal.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from d2l_async.torch_async import AsyncTensor, asynchronous, make_async


def test_a_tensor_made_outside_is_deep_copied_inside():
    x = torch.randn(3, 4)
    x.note = "kept"  # a reader's attribute travels, as torch's deepcopy carries __dict__
    before = x.tolist()
    with asynchronous():
        y = copy.deepcopy(x)
        x.add_(1)  # the copy is its own memory
        got = y.tolist(), y.note, type(y)
    assert got == (before, "kept", AsyncTensor)


def test_views_of_one_storage_stay_views_of_one_copy():
    base = torch.arange(6.0)
    a, b = base[:4], base[2:]
    with asynchronous():
        a2, b2 = copy.deepcopy((a, b))
        a2[2] = 100.0  # shared, as eager's copies share
        got = a2.tolist(), b2.tolist()
    eager_a, eager_b = copy.deepcopy((a, b))
    eager_a[2] = 100.0
    assert got == (eager_a.tolist(), eager_b.tolist())


def test_deepcopy_of_a_non_leaf_raises_eagers_error():
    x = torch.ones(2, requires_grad=True)
    with asynchronous():
        y = x * 2
        with pytest.raises(RuntimeError, match="graph leaves"):
            copy.deepcopy(y + torch.ones(2))  # an AsyncTensor: its own deepcopy waits and copies


def _bn_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


@pytest.mark.parametrize("wrap", ["as built", "make_async"])
@pytest.mark.parametrize("workers", [1, 2])
def test_an_ema_teacher_of_a_model_built_outside_trains_as_eager(wrap, workers):
    """The mean-teacher / EMA pattern: ``AveragedModel`` deep-copies the student (its buffers
    included) and lerps towards it after every step."""
    def run(student, wrap):
        student = wrap(student)
        teacher = AveragedModel(student, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
        opt = torch.optim.SGD(student.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        X, y = torch.randn(16, 4, generator=g), torch.randint(0, 2, (16,), generator=g)
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(student(X), y).backward()
            opt.step()
            teacher.update_parameters(student)
        teacher.eval()
        return teacher(X).detach().numpy().tobytes(), [b.tolist() for b in teacher.module[1].buffers()]
    expected = run(_bn_model(), lambda m: m)
    student = _bn_model()  # built outside the block
    with asynchronous(workers=workers):
        got = run(student, make_async if wrap == "make_async" else (lambda m: m))
    assert got == expected


def test_a_target_network_copied_inside_the_block_follows_its_source():
    """DQN's target network: ``deepcopy`` of the online net, refreshed by ``load_state_dict``."""
    def run():
        online = _bn_model()
        target = copy.deepcopy(online)
        opt = torch.optim.Adam(online.parameters(), lr=0.01)
        X = torch.randn(8, 4, generator=torch.Generator().manual_seed(2))
        outs = []
        for step in range(4):
            opt.zero_grad()
            (online(X) - target(X).detach()).pow(2).mean().backward()
            opt.step()
            if step % 2 == 1:
                target.load_state_dict(online.state_dict())
            outs.append(target(X).detach().numpy().tobytes())
        return outs
    expected = run()
    with asynchronous():
        got = run()
    assert got == expected
