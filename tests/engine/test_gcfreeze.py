"""An engine's ``with`` block keeps older objects out of full collections (d2l_async.engine._gcfreeze).

A frontend that runs ahead leaves queued ops in the oldest generation; each full collection then
walked every object of the process (~110-180 ms after ``import torch``), 3-5 us of each queued
``y = x + 1``.  The torch block's side of the same rule is tested in tests/torch_async/test_frontend_path.py.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from d2l_async.engine import NaiveEngine, ThreadedEngine
from d2l_async.torch_async import asynchronous


class _Node:
    pass


def _cycle() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # only the cycle collector frees it
    return weakref.ref(a)


def test_an_engine_block_freezes_older_objects_and_gives_them_back():
    gone = _cycle()  # made before the block, unreachable already: only a full collection frees it
    start = gc.get_freeze_count()
    with ThreadedEngine() as eng:
        assert gc.get_freeze_count() > start
        gc.collect()
        assert gone() is not None  # frozen: left alone while the block is open
        y = eng.array(torch.ones(2)) + 1
        assert y.numpy().tolist() == [2.0, 2.0]
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None


def test_blocks_of_both_kinds_nest_and_the_last_one_unfreezes():
    gone = _cycle()
    with ThreadedEngine() as eng:
        with asynchronous():
            torch.ones(2) + 1
        with NaiveEngine() as inner:
            (inner.array(torch.ones(1)) + 1).wait_to_read()
        gc.collect()
        assert gone() is not None  # the inner blocks' ends gave nothing back: still frozen
        (eng.array(torch.ones(1)) + 1).wait_to_read()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None


def test_an_engine_used_without_with_freezes_nothing():
    start = gc.get_freeze_count()
    eng = ThreadedEngine()
    try:
        (eng.array(torch.ones(1)) + 1).wait_to_read()
        assert gc.get_freeze_count() == start
    finally:
        eng.shutdown()


def test_a_block_ended_by_an_exception_gives_the_objects_back():
    with pytest.raises(KeyError):
        with ThreadedEngine() as eng:
            eng.array(torch.ones(1)) + 1
            raise KeyError("the reader's own error")
    assert gc.get_freeze_count() == 0


def test_a_process_that_froze_objects_itself_is_left_as_it_is():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with ThreadedEngine() as eng:
            assert gc.get_freeze_count() == frozen
            (eng.array(torch.ones(1)) + 1).wait_to_read()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
