"""The hard cases, one test each: the chosen behaviour (a correct result, a recorded
blocking point, or a clear error) -- never a crash.  Cases that once crashed the interpreter in
the feasibility prototype run in a subprocess, so a segfault fails the test instead of pytest.
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest
import torch

import d2l_async
from d2l_async.engine._op import EngineOp
from d2l_async.torch_async import AsyncTensor, UnsupportedTorchError, asynchronous, synchronize
from d2l_async.torch_async import _compat

from .helpers import WAIT, blocks, hold, hold_until_blocked, run_isolated


def test_ops_return_before_they_run_and_blockers_wait():
    with asynchronous() as rt:
        x = torch.ones(3)
        ev = hold(rt)
        y = x + 1
        assert type(y) is AsyncTensor and y.shape == (3,) and y._real is None  # queued, not run
        ev.set()
        assert y.sum().item() == 6.0  # a blocker: waits for y, then for sum
        hold_until_blocked(rt)
        z = y * 2
        print(z)                      # waits for the gate, then for z
    reasons = [r for r, _ in blocks(rt)]
    assert "item" in reasons and "print" in reasons
    src = dict(blocks(rt))["item"]
    assert "test_hard_cases.py" in src and "y.sum().item()" in src  # the user's line, not torch's


def test_meta_strides_may_differ_on_size_one_dims_values_do_not():
    """Meta kernels may choose other strides than eager kernels for dimensions of size 1
    (pytorch/pytorch#159660): ``y.stride()`` can differ there, addresses and values cannot."""
    def f():
        return torch.ones(1, 3).permute(1, 0) * 2
    eager = f()
    with asynchronous():
        y = f()
        shown, values = y.stride(), y.numpy().copy()
        real_stride = y._real.stride()
    assert real_stride == eager.stride()  # the data is eager's own
    assert np.array_equal(values, eager.numpy())
    assert all(a == b for a, b, n in zip(shown, eager.stride(), eager.shape) if n != 1)
    assert shown != eager.stride()  # the documented difference, on the size-1 dimension only


def test_a_plain_tensor_written_inside_the_block_is_written_before_the_call_returns():
    """Tensors made outside the block stay plain: a write into one waits for the queued reads of
    it, runs at once, and is recorded as a blocking point -- code reading its memory directly
    (numpy views, other threads) never sees a half-done state."""
    x = torch.ones(3)
    view = x.numpy()
    with asynchronous() as rt:
        hold_until_blocked(rt)
        y = x * 2                   # a queued read of x
        x.add_(1)                   # must wait for the read, then run now
        assert view.tolist() == [2.0, 2.0, 2.0]  # memory already updated
        assert y.tolist() == [2.0, 2.0, 2.0]     # the read saw x before the write
    assert type(x) is torch.Tensor
    assert any(r.startswith("write to a plain tensor") for r, _ in blocks(rt))


def test_memory_escaped_through_numpy_is_shared_in_program_order():
    """While a numpy array from ``.numpy()`` shares a tensor's memory, ops on that memory run at
    once (blocking points), so the array and the ops see each other's writes in program order, as
    in eager torch (before, a queued write showed only after synchronize())."""
    with asynchronous() as rt:
        x = torch.zeros(3)
        arr = x.numpy()             # a blocker; arr shares x's memory from now on
        hold_until_blocked(rt)
        x.add_(1)                   # runs now: arr is alive
        assert arr.tolist() == [1.0, 1.0, 1.0]
        y = x * 2                   # a read, also now
        arr[0] = 5                  # a write through the array after the read
        assert y.tolist() == [2.0, 2.0, 2.0]
        del arr                     # the array is gone: x's ops are queued again
        z = x + 1
        assert z.tolist() == [6.0, 2.0, 2.0]
    reasons = [r for r, _ in blocks(rt)]
    assert sum(r.startswith("memory shared with a numpy array") for r in reasons) == 2  # add_ and mul, not z


def test_from_numpy_memory_is_read_when_the_op_runs():
    a = np.zeros(3, dtype=np.float32)
    t = torch.from_numpy(a)
    with asynchronous() as rt:
        ev = hold(rt)
        y = t + 1                   # reads a's memory when it runs
        a[0] = 5                    # a write the engine cannot see
        ev.set()
        assert y.tolist() == [6.0, 1.0, 1.0]  # the queued read saw it: documented, like CUDA


@pytest.mark.parametrize("workers", [1, 2])
def test_rng_state_functions_wait_for_queued_random_ops(workers):
    def run():
        torch.manual_seed(0)
        a = torch.randn(4)
        state = torch.get_rng_state()
        b = torch.randn(4)
        torch.set_rng_state(state)
        c = torch.randn(4)
        torch.manual_seed(0)
        d = torch.rand(2)
        return [t.tolist() for t in (a, b, c, d)]
    expected = run()
    with asynchronous(workers=workers) as rt:
        hold_until_blocked(rt)  # with one worker, the random ops are still queued at get_rng_state()
        got = run()
    assert got == expected and got[1] == got[2]
    if workers == 1:
        assert any(r.startswith("RNG state") for r, _ in blocks(rt))
    assert torch.manual_seed.__module__ == "torch.random" and not hasattr(torch.manual_seed,
                                                                          "__wrapped_by_d2l_async__")


def test_explicit_generator_runs_synchronously():
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    expected = torch.randn(3, generator=g1)
    with asynchronous() as rt:
        got = torch.randn(3, generator=g2)
        assert got.tolist() == expected.tolist()
    assert any(r.startswith("explicit generator") for r, _ in blocks(rt))


def test_inplace_metadata_changes_t_resize_out_are_correct():
    out = run_isolated("""
        import torch, warnings
        from d2l_async.torch_async import asynchronous
        warnings.simplefilter("ignore")
        def prog():
            x = torch.arange(6.).reshape(2, 3)
            x.t_()
            y = x * 1
            z = torch.zeros(2)
            torch.add(x, 1, out=z)          # out= resizes z to (3, 2)
            w = torch.ones(4)
            w.resize_(2, 3)
            w.fill_(7)
            v = x[0]
            x.unsqueeze_(0)
            return [tuple(t.shape) for t in (x, y, z, w, v)], [t.tolist() for t in (x, y, z, w, v)]
        e = prog()
        for workers in (1, 2):
            with asynchronous(workers=workers):
                g = prog()
            assert g == e, (g, e)
        print("ok", e[0])
    """)
    assert out.startswith("ok")


@pytest.mark.parametrize("workers", [1, 2])
def test_data_assignment_waits_for_ops_queued_before_it(workers):
    """``t.data = new`` while ops on ``t`` are still queued: those ops run on ``t``'s old data and
    later ones on the new data (``Module._apply`` after ``nn.Linear``'s queued init; a swap made on
    the frontend at once once handed those init ops ``None``)."""
    with asynchronous(workers=workers) as rt:
        t = torch.zeros(3)
        ev = hold(rt)
        t.add_(1)                         # queued behind the gate: must write t's old data
        old_sum = t.sum()                 # queued: reads t's old data after the write
        t.data = torch.full((2,), 5.0, dtype=torch.float64)   # while the two ops are still pending
        new_sum = t.sum()                 # reads the new data
        ev.set()
        assert old_sum.item() == 3.0 and new_sum.item() == 10.0
        assert t.dtype is torch.float64 and t.tolist() == [5.0, 5.0]
        synchronize(timeout=WAIT)


def test_module_apply_on_parameters_made_inside_the_block():
    """``Module._apply`` (``.double()``) assigns ``param.data``; on a storage-less tensor that
    assignment is re-pointed at the converted data instead of crashing or going stale."""
    out = run_isolated("""
        import torch
        from torch import nn
        from d2l_async.torch_async import asynchronous, AsyncTensor
        torch.manual_seed(0)
        e = nn.Linear(3, 2).double()(torch.ones(1, 3, dtype=torch.float64))
        with asynchronous():
            torch.manual_seed(0)
            lin = nn.Linear(3, 2)
            lin.double()
            g = lin(torch.ones(1, 3, dtype=torch.float64))
            assert type(lin.weight) is AsyncTensor and lin.weight.dtype is torch.float64
            assert g.tolist() == e.tolist(), (g, e)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_workers_use_the_frontends_thread_count():
    seen = []
    with asynchronous() as rt:
        op = EngineOp("probe", "op", lambda op: seen.append(torch.get_num_threads()), None, None, (), (),
                      rt._dev, 0, None)
        rt.submit(op)
        synchronize(timeout=WAIT)
    assert seen == [torch.get_num_threads()] == [rt.torch_threads]
    x = torch.randn(1_000_000, generator=torch.Generator().manual_seed(0))
    with asynchronous():
        s = x.sum().item()  # a parallel reduction splits the same way: bitwise eager's
    assert s == x.sum().item()


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")
@pytest.mark.parametrize("asked", [5, 0])
def test_workers_give_the_frontend_cpu_priority(asked):
    """A worker stands in for a device: it and the threads it starts (torch's intra-op pool) run
    ``worker_nice`` steps below the frontend, whose own priority the block leaves as it was."""
    me = _nice()
    seen = []

    def probe(op):
        child = threading.Thread(target=lambda: seen.append(_nice()))
        child.start()
        child.join(WAIT)
        seen.append(_nice())

    with asynchronous(worker_nice=asked) as rt:
        rt.submit(EngineOp("probe", "op", probe, None, None, (), (), rt._dev, 0, None))
        synchronize(timeout=WAIT)
        assert _nice() == me
    want = min(me + asked, 19)
    assert seen == [want, want] and rt.worker_nice == want - me and _nice() == me
    assert rt.trace().meta["worker_nice"] == want - me


def test_a_dropped_runtime_is_collected_and_its_workers_stop():
    """Its workers' start-up (priority, torch threads) must not refer to the runtime: a worker that
    did would keep a dropped runtime, and itself, alive for ever."""
    import gc
    import warnings
    import weakref

    from d2l_async.torch_async import AsyncRuntime

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rt = AsyncRuntime(workers=2)
        threads = [t for d in rt._devices.values() for t in d.threads]
        ref = weakref.ref(rt)
        del rt
        gc.collect()
    assert ref() is None
    for t in threads:
        t.join(WAIT)
    assert not any(t.is_alive() for t in threads)
    assert any(issubclass(w.category, ResourceWarning) for w in caught)


@pytest.mark.parametrize("bad", [-1, 20, 2.5, True, "5"])
def test_worker_nice_must_be_a_step_count(bad):
    with pytest.raises(ValueError, match="worker_nice"):
        asynchronous(worker_nice=bad)  # at once, as for a decorator
    from d2l_async.torch_async import AsyncRuntime
    with pytest.raises(ValueError, match="worker_nice"):
        AsyncRuntime(worker_nice=bad)


def test_torch_compile_is_refused_with_a_clear_error():
    with asynchronous():
        with pytest.raises(UnsupportedTorchError, match="torch.compile is not supported"):
            torch.compile(lambda t: t + 1)
    assert torch.compile is not None and torch.compile.__module__ == "torch"


def test_torch_export_is_refused_with_a_clear_error():
    class M(torch.nn.Module):
        def forward(self, t):
            return t + 1
    export = torch.export.export
    with asynchronous():
        with pytest.raises(UnsupportedTorchError, match="torch.export.export is not supported"):
            torch.export.export(M(), (torch.ones(2),))
    assert torch.export.export is export


def _scalars():
    """0-dim tensors of each kind ``torch.tensor`` stores a number of, made from data: floats (a
    book's losses), integers, a bool, a complex."""
    f = [torch.arange(3.0)[i] * 1.5 for i in range(3)]
    return f, [torch.arange(4)[i] + 1 for i in range(2)], torch.arange(3.0)[1] > 0, torch.ones((), dtype=torch.cfloat) * 2j


#: name -> a constructor over (floats, ints, bool, complex); each reads every element's number in C++
FROM_LISTS = {
    "tensor": lambda f, i, b, c: torch.tensor(f),
    "as_tensor": lambda f, i, b, c: torch.as_tensor(f),
    "asarray": lambda f, i, b, c: torch.asarray(f),
    "Tensor": lambda f, i, b, c: torch.Tensor(f),
    "new_tensor": lambda f, i, b, c: f[0].new_tensor(f),
    "nested": lambda f, i, b, c: torch.tensor([[f[0], f[1]], [f[2], 7.0]]),
    "ints": lambda f, i, b, c: torch.tensor(i),
    "ints as float64": lambda f, i, b, c: torch.tensor(i, dtype=torch.float64),
    "bool": lambda f, i, b, c: torch.tensor([b, b]),
    "complex": lambda f, i, b, c: torch.tensor([c, 1.0]),
}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("name", list(FROM_LISTS))
def test_torch_tensor_of_a_list_of_block_scalars_is_eagers_value(name, workers):
    """``torch.tensor(losses)``: C++ asks each element for its number with the dispatch to Python off,
    and torch's own ``__float__`` read the storage-less wrapper ("data is not allocated yet")."""
    make = FROM_LISTS[name]
    eager = make(*_scalars())
    with asynchronous(workers=workers) as rt:
        for _ in range(workers):
            hold_until_blocked(rt)  # the elements are still queued when torch.tensor asks for them
        args = _scalars()
        inside = make(*args)
        assert type(inside) is AsyncTensor
        inside = inside.clone()
    after = make(*args)  # after the block, from the same tensors
    for got in (inside, after):
        assert got.dtype == eager.dtype and got.shape == eager.shape and torch.equal(got, eager)
    assert "item" in [r for r, _ in blocks(rt)]


def test_torch_tensor_of_a_list_of_block_vectors_raises_eagers_error():
    with pytest.raises(ValueError) as eager:
        torch.tensor([torch.ones(2), torch.ones(2)])
    with asynchronous():
        with pytest.raises(ValueError) as inside:
            torch.tensor([torch.ones(2) + 1, torch.ones(2) + 1])
    assert str(inside.value) == str(eager.value)


def test_errors_of_queued_ops_surface_at_the_next_blocking_point():
    with asynchronous() as rt:
        x = torch.ones(3)
        bad = x.index_select(0, torch.tensor([7]))  # metadata is fine; the kernel fails later
        assert type(bad) is AsyncTensor
        with pytest.raises(IndexError) as info:
            bad.item()
        assert "deferred" in "\n".join(getattr(info.value, "__notes__", []))
        synchronize(timeout=WAIT)  # delivered once: the barrier does not raise it again (as the engine)
        worse = x.index_select(0, torch.tensor([9]))
        del worse
        with pytest.raises(IndexError):
            synchronize(timeout=WAIT)  # an error no blocker delivered: the barrier raises it
        synchronize(timeout=WAIT)  # once
    assert rt.statistics().failed >= 1


def test_errors_eager_raises_at_the_call_are_raised_at_the_call():
    with asynchronous():
        with pytest.raises(RuntimeError, match="size of tensor"):
            torch.ones(3) + torch.ones(4)


def test_raw_memory_access_raises_a_clear_error():
    with asynchronous():
        y = torch.ones(3) + 1
        with pytest.raises(RuntimeError, match="asynchronous"):
            y.data_ptr()
        with pytest.raises(RuntimeError, match="asynchronous"):
            y.untyped_storage()


def test_unsupported_torch_version_fails_clearly(monkeypatch):
    monkeypatch.setattr(_compat, "_CHECKED", [])
    monkeypatch.setattr(torch, "__version__", "1.13.1")
    with pytest.raises(UnsupportedTorchError, match="needs torch >= 2.3"):
        with asynchronous():
            pass


def test_tensors_made_inside_stay_usable_after_the_block():
    with asynchronous():
        x = torch.arange(4.)
        y = x * 2
    z = y + 1                      # runs eagerly now
    y.add_(1)
    assert type(z) is torch.Tensor and z.tolist() == [1.0, 3.0, 5.0, 7.0]
    assert y.tolist() == [1.0, 3.0, 5.0, 7.0] and f"{y.sum():.1f}" == "16.0"


def test_public_exports_and_bad_arguments():
    assert d2l_async.asynchronous is asynchronous and d2l_async.synchronize is synchronize
    with pytest.raises(ValueError, match="workers"):
        asynchronous(workers=0)
    with pytest.raises(TypeError, match="record"):
        asynchronous(record="yes")
    synchronize()  # outside any block: nothing to wait for


def test_decorator_form_runs_each_call_in_its_own_block():
    @asynchronous()
    def f(n):
        return (torch.ones(n) * 2).sum().item()
    assert f(3) == 6.0 and f(4) == 8.0


def test_benchmark_timer_synchronizes_plain_torch_blocks():
    with asynchronous():
        x = torch.randn(300, 300)
        with d2l_async.Benchmark("matmuls", sync=True):
            for _ in range(5):
                y = x @ x
        assert y._op is not None and y._op.state.value == "done"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_ops_pass_through_unchanged():
    with asynchronous():
        x = torch.ones(3, device="cuda")
        assert type(x) is torch.Tensor and x.is_cuda
        y = (torch.ones(3) + 1).cuda()
        assert y.is_cuda and y.tolist() == [2.0, 2.0, 2.0]


def test_every_way_out_to_raw_memory_waits_for_the_data():
    """numpy, np.asarray, np.from_dlpack, pickle, torch.save and deepcopy all see the computed
    values (they wait); storage access raises instead of handing out unfinished memory."""
    import copy
    import io
    import pickle

    with asynchronous() as rt:
        x = torch.arange(4.) - 1
        hold_until_blocked(rt)
        y = x * 2
        want = [-2.0, 0.0, 2.0, 4.0]
        assert np.asarray(y).tolist() == want
        assert np.from_dlpack(y).tolist() == want
        assert pickle.loads(pickle.dumps(y)).tolist() == want
        buf = io.BytesIO()
        torch.save({"y": y}, buf)
        buf.seek(0)
        assert torch.load(buf)["y"].tolist() == want
        assert copy.deepcopy(y).tolist() == want
        with pytest.raises(RuntimeError, match="no storage"):
            y.storage()
