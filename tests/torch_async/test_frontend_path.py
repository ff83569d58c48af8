"""The frontend's own path: size and stride questions are answered by
the wrapper in C++, never by the runtime in Python, and in-place metadata changes keep the
wrapper's C++ metadata, its ``_m`` and eager torch's tensor in step."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from d2l_async.torch_async import asynchronous
from d2l_async.torch_async._runtime import AsyncRuntime

QUERIES = {"sym_size", "sym_stride", "dim", "sym_numel", "numel", "sym_storage_offset", "is_contiguous",
           "is_strides_like_format", "is_non_overlapping_and_dense"}


def _meta(t: torch.Tensor) -> tuple:
    return tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.is_contiguous(), t.dim(), t.numel()


def test_a_training_step_asks_the_runtime_no_size_or_stride_question(monkeypatch):
    """A book MLP's forward, backward and SGD step: every call that reaches the runtime is an op
    to queue.  (With sizes answered in Python, 55 of 101 calls per step were such questions.)"""
    seen: list[str] = []
    dispatch = AsyncRuntime.dispatch

    def spy(self, func, args, kwargs, depth=3):
        seen.append(func.overloadpacket.__name__)
        return dispatch(self, func, args, kwargs, depth)

    monkeypatch.setattr(AsyncRuntime, "dispatch", spy)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    X, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    with asynchronous():
        for _ in range(2):
            loss = nn.functional.cross_entropy(net(X), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        final = loss.item()
    assert final == final and len(seen) > 20  # the step reached the runtime
    asked = sorted({name for name in seen if name in QUERIES})
    assert not asked, f"size/stride questions reached Python: {asked}"


@pytest.mark.parametrize("workers", [1, 2])
def test_inplace_metadata_changes_keep_the_wrapper_in_step(workers):
    """t_(), unsqueeze_(), resize_(), set_(), as_strided_() and an out= that resizes: the wrapper's
    C++ shape, strides, offset and contiguity equal eager's at once (before any data is waited
    for) and equal its ``_m``; the data then equals eager's too."""
    def prog():
        x = torch.arange(6.).reshape(2, 3)
        x.t_()
        a = x * 2
        u = torch.arange(4.)
        u.unsqueeze_(1)
        r = torch.ones(4)
        r.resize_(3, 5)
        r.fill_(2)
        s = torch.zeros(1)
        s.set_(torch.arange(10.)[2:8].reshape(2, 3))
        o = torch.zeros(2)
        torch.mul(x, 3, out=o)
        v = torch.arange(12.)
        v.as_strided_((3, 2), (1, 3), 1)
        return x, a, u, r, s, o, v

    eager = prog()
    with asynchronous(workers=workers):
        got = prog()
        metas = [_meta(t) for t in got]  # no blocking point before these
        own = [t._m[:4] for t in got]
        data = [t.tolist() for t in got]
    assert metas == [_meta(t) for t in eager]
    assert own == [m[:4] for m in metas]
    assert data == [t.tolist() for t in eager]


def test_a_block_keeps_older_objects_out_of_full_collections_and_gives_them_back():
    """gc.freeze while a block is open (full collections walked every object of the process, 9 us of
    each queued op); after it, a cycle made before the block and dropped inside it is collected."""
    import gc
    import weakref

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only the cycle collector frees it
    gone = weakref.ref(a)
    start = gc.get_freeze_count()  # Python 3.12 starts with 375 of its own (0 once a block has closed)
    with asynchronous():
        assert gc.get_freeze_count() > start
        with asynchronous():  # nested: still frozen after the inner block
            pass
        assert gc.get_freeze_count() > start
        del a, b
        gc.collect()
        assert gone() is not None  # frozen: not collected while the block is open
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None


def test_objects_frozen_before_the_import_do_not_turn_the_freeze_off():
    """Python 3.12 starts with objects in the permanent generation (375 tuples): the rule "freeze
    only if nothing is frozen" never held there, and blocks never froze.  Staged on any Python by
    freezing before the import."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import gc
        junk = [[i] for i in range(1000)]
        gc.freeze()
        before = gc.get_freeze_count()
        import torch
        from d2l_async.torch_async import asynchronous
        with asynchronous():
            inside = gc.get_freeze_count()
            y = torch.ones(2) + 1
        print(before > 0, inside > before, gc.get_freeze_count(), y.tolist())
    """)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == "True True 0 [2.0, 2.0]", out.stdout


def test_a_process_that_froze_objects_itself_is_left_as_it_is():
    import gc

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with asynchronous():
            x = torch.ones(2) + 1
        assert gc.get_freeze_count() == frozen and x.tolist() == [2.0, 2.0]
    finally:
        gc.unfreeze()
