"""The dependency rules as pure functions: exact results, no threads (dask local.py style)."""

from __future__ import annotations

import sys
import threading

import pytest

from d2l_async.engine._deps import Op, Var, finish_op, finish_write, push_op, split_access


def op(reads=(), writes=()):
    r, w = split_access(reads, writes)
    return Op(r, w)


def test_reads_of_one_version_are_granted_together():
    x = Var()
    a, b = op(reads=[x]), op(reads=[x])
    assert push_op(a) and push_op(b)
    assert x.readers == 2 and x.writer is None


def test_write_waits_for_earlier_reads_then_is_granted():
    x = Var()
    r1, r2, w = op(reads=[x]), op(reads=[x]), op(writes=[x])
    assert push_op(r1) and push_op(r2)
    assert not push_op(w)
    assert (x.readers, x.writer, w.wait) == (2, w, 1)
    assert finish_op(r1) == []
    assert finish_op(r2) == [w]
    assert w.wait == 0


def test_read_after_write_waits_and_sees_the_write():
    x = Var()
    w, r = op(writes=[x]), op(reads=[x])
    assert push_op(w)
    assert not push_op(r)
    assert list(x.waiting) == [(r, False)]
    assert finish_op(w) == [r]
    assert (x.readers, x.writer) == (1, None)


def test_finishing_a_write_admits_reads_up_to_the_next_write():
    x = Var()
    w1, r1, r2, w2, r3 = op(writes=[x]), op(reads=[x]), op(reads=[x]), op(writes=[x]), op(reads=[x])
    assert push_op(w1)
    assert [push_op(o) for o in (r1, r2, w2, r3)] == [False] * 4
    assert finish_op(w1) == [r1, r2]
    assert (x.readers, x.writer) == (2, w2)
    assert finish_op(r1) == []
    assert finish_op(r2) == [w2]
    assert finish_op(w2) == [r3]
    assert (x.readers, x.writer, len(x.waiting)) == (1, None, 0)


def test_write_after_write_is_ordered():
    x = Var()
    w1, w2 = op(writes=[x]), op(writes=[x])
    assert push_op(w1) and not push_op(w2)
    assert finish_op(w1) == [w2]
    assert x.writer is w2


def test_an_op_is_ready_only_when_every_var_granted():
    x, y, z = Var(), Var(), Var()
    wx, wy = op(writes=[x]), op(writes=[y])
    both = op(reads=[x, y], writes=[z])
    assert push_op(wx) and push_op(wy)
    assert not push_op(both) and both.wait == 2
    assert finish_op(wx) == []
    assert both.wait == 1
    assert finish_op(wy) == [both]


def test_in_place_update_is_a_write_only():
    x, y = Var(), Var()
    r, w = split_access([x, y, x], [x])
    assert r == (y,) and w == (x,)
    r, w = split_access([y, y], [])
    assert r == (y,) and w == ()


def test_reader_counter_does_not_grow_a_list():
    x = Var()
    readers = [op(reads=[x]) for _ in range(1000)]
    assert all(push_op(o) for o in readers)
    assert x.readers == 1000 and x.waiting is None
    for o in readers:
        finish_op(o)
    assert x.readers == 0


def test_one_var_read_write_read_through_push_and_finish():
    x = Var()
    a, b, c = op(reads=[x]), op(writes=[x]), op(reads=[x])
    assert push_op(a)
    assert not push_op(b)  # waits for the reader a
    assert not push_op(c)  # behind the writer
    assert finish_op(a) == [b]
    assert finish_op(b) == [c] and x.readers == 1


def test_finish_write_admits_the_line_up_to_the_next_write():
    x = Var()
    w1, r1, r2, w2 = op(writes=[x]), op(reads=[x]), op(reads=[x]), op(writes=[x])
    assert push_op(w1) and not push_op(r1) and not push_op(r2) and not push_op(w2)
    granted: list = []
    finish_write(x, granted)
    assert granted == [r1, r2] and (x.readers, x.writer) == (2, w2)


def test_a_fresh_output_is_granted_at_push_and_released_at_finish():
    x, y = Var(), Var()
    make = Op((x,), (), out=y)
    assert push_op(make) and y.writer is make
    reader = op(reads=[y])
    assert not push_op(reader)  # reads of y wait for the op that makes it
    assert finish_op(make) == [reader]
    assert (y.writer, y.readers) == (None, 1)


def _count_calls(codes: dict, make):
    """Run ``make()`` with a profiler on every thread; how often each code object in ``codes`` ran."""
    seen: list = []
    wanted = set(codes.values())

    def prof(frame, event, arg):
        if event == "call" and frame.f_code in wanted:
            seen.append(frame.f_code)  # list.append is atomic: workers call it too

    threading.setprofile(prof)
    sys.setprofile(prof)
    try:
        ops = make()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return ops, {name: seen.count(code) for name, code in codes.items()}


@pytest.mark.parametrize("kind", ["ThreadedEngine", "NaiveEngine"])
def test_the_engine_books_and_finishes_every_op_through_these_rules(kind):
    import torch

    from d2l_async import engine

    def program():
        options = {"workers": 2} if kind == "ThreadedEngine" else {}
        with getattr(engine, kind)(record=False, **options) as eng:
            x, y = eng.array(torch.ones(3)), eng.array(torch.zeros(3))
            ex, ey = torch.ones(3), torch.zeros(3)
            for _ in range(20):
                z = x * 2 + y        # two fresh outputs, reads of x and y
                x += 1               # a write after reads
                y += z               # a write of y after its read above
                ez = ex * 2 + ey
                ex += 1
                ey += ez
            eng.waitall()
            s = eng.statistics()
            assert torch.equal(torch.as_tensor(x.asnumpy()), ex) and torch.equal(torch.as_tensor(y.asnumpy()), ey)
            return s.done + s.failed

    ops, calls = _count_calls({"push_op": push_op.__code__, "finish_op": finish_op.__code__}, program)
    assert ops >= 60
    assert calls == {"push_op": ops, "finish_op": ops}
