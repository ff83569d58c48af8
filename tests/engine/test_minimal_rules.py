"""The one-file engine's rules (``engine/minimal.py``) held to the fast engine's rule tests.

The cases of ``tests/engine/test_deps.py`` that apply to it, on its own ``Var``/``Op`` with exact
fields and no threads; then the engine, counted: it books and finishes every op through these two
functions.  (``test_deps.py``'s ``finish_write`` case has no counterpart: here that step is inside
``finish_op``, and the case "a finished write admits the reads up to the next write" covers it.)
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import torch

from d2l_async.engine.minimal import Engine, Op, Var, finish_op, push_op

WAIT = 20.0


def op(reads=(), writes=()):
    return Op(None, reads, writes)


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
    o = op(reads=[x, y, x], writes=[x])
    assert o.reads == (y,) and o.writes == (x,)
    o = op(reads=[y, y])
    assert o.reads == (y,) and o.writes == ()


def test_reader_counter_does_not_grow_a_list():
    x = Var()
    readers = [op(reads=[x]) for _ in range(1000)]
    assert all(push_op(o) for o in readers)
    assert x.readers == 1000 and len(x.waiting) == 0
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


def test_a_fresh_output_is_granted_at_push_and_released_at_finish():
    x, y = Var(), Var()
    make = op(reads=[x], writes=[y])
    assert push_op(make) and y.writer is make
    reader = op(reads=[y])
    assert not push_op(reader)  # reads of y wait for the op that makes it
    assert finish_op(make) == [reader]
    assert (y.writer, y.readers) == (None, 1)


def test_an_op_two_vars_grant_in_one_finish_is_ready_once():
    x, y = Var(), Var()
    w, r = op(writes=[x, y]), op(reads=[x, y])
    assert push_op(w) and not push_op(r) and r.wait == 2
    assert finish_op(w) == [r]  # listed twice, it would be queued and run twice
    assert (x.readers, y.readers, r.wait) == (1, 1, 0)


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
        result = make()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return result, {name: seen.count(code) for name, code in codes.items()}


def test_the_engine_books_and_finishes_every_op_through_these_rules():
    pushed = []

    def program():
        eng = Engine(workers=2, devices=("cpu:0", "cpu:1"))
        try:
            original = eng.push

            def counting_push(*args, **kwargs):  # every op, the blockers' reads included, comes through push
                op = original(*args, **kwargs)
                pushed.append(op)
                return op

            eng.push = counting_push
            x, y = eng.array(torch.ones(3)), eng.array(torch.zeros(3), device="cpu:1")
            ex, ey = torch.ones(3), torch.zeros(3)
            for _ in range(20):
                z = x * 2 + y.to("cpu:0")  # a copy between devices, two fresh outputs
                x += 1                     # a write after reads
                y += z.to("cpu:1")         # a write of y after its read above
                ez = ex * 2 + ey
                ex += 1
                ey += ez
            eng.waitall(timeout=WAIT)
            assert np.array_equal(x.asnumpy(), ex.numpy()) and np.array_equal(y.asnumpy(), ey.numpy())
            return len(pushed)
        finally:
            eng.close(timeout=WAIT)

    ops, calls = _count_calls({"push_op": push_op.__code__, "finish_op": finish_op.__code__}, program)
    assert ops >= 120
    assert calls == {"push_op": ops, "finish_op": ops}
    assert all(o.done for o in pushed)
