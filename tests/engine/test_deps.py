"""The dependency rules as pure functions: exact results, no threads (dask local.py style)."""

from __future__ import annotations

from d2l_async.engine._deps import (Op, Var, add_read, add_write, finish_op, finish_read, finish_write,
                                    push_op, split_access)


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


def test_single_var_functions():
    x = Var()
    a, b, c = Op(), Op(), Op()
    assert add_read(x, a)
    assert not add_write(x, b)  # waits for the reader a
    assert not add_read(x, c)  # behind the writer
    granted: list = []
    finish_read(x, granted)
    assert granted == [b]
    granted = []
    finish_write(x, granted)
    assert granted == [c] and x.readers == 1
