"""Dependency bookkeeping: which ops may run now.  Pure functions, no threads, no locks.

This is MXNet's variable protocol (the book's section 13.2, "Asynchronous Computation"), written as
small functions in the style of dask's ``local.py`` so that a test can drive it with plain objects
and check exact results.  The engine runs exactly these: :meth:`._scheduler.Scheduler._book` calls
:func:`push_op` for every op it books and :meth:`._completion.Completion._finish` calls
:func:`finish_op` for every op that finished, both with the engine's lock held -- on a worker thread
(threaded engine) or on the frontend thread that runs the ops (naive engine).
``tests/engine/test_deps.py`` drives them without threads and counts those calls on both engines.

Every array is a :class:`Var`.  Every op declares the vars it reads and the vars it writes, and
keeps a counter ``wait``: how many of its vars have not yet *granted* it access.  An op with
``wait == 0`` is ready to run.

A var grants access in the order ops were pushed::

    readers  the number of granted reads of the current version that have not finished
    writer   the write op at the head of the line: it is granted once ``readers`` drops to 0;
             while it is set, no new read is granted (later reads must see its result)
    waiting  ops pushed after ``writer``, first in first out, as ``(op, is_write)`` pairs

Rules (``R`` = read, ``W`` = write)::

    push R:    no writer  -> readers += 1, grant         (reads of one version overlap)
               writer     -> join the line
    push W:    no writer  -> writer = W; grant if readers == 0, else wait for the readers
               writer     -> join the line
    finish R:  readers -= 1; if 0 and a writer waits -> grant the writer  (write after read)
    finish W:  writer = None, then admit from the line: every read up to the next write is
               granted; the next write becomes the writer (granted if no read was admitted)

Only counters change when a read is pushed or finished: nothing grows with the number of readers,
so 10,000 reads of one ``x`` cost the same per op as one.

An op that both reads and writes a var (``x += 1``) is a write of that var: exclusive access
implies reading.  :func:`split_access` removes such duplicates before the rules run.  An op's
fresh output (``Op.out``: ``y`` in ``y = x + 1``) is a write nothing can precede: granted at push.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable

__all__ = ["Var", "Op", "split_access", "push_op", "finish_op", "finish_write"]


class Var:
    """The dependency state of one array (MXNet's ``Var``).

    Attributes:
        readers: granted reads of the current version that have not finished.
        writer: the write op at the head of the line (granted when ``readers == 0``), or None.
        waiting: ops pushed behind ``writer``, as ``(op, is_write)``; None while empty, so an
            array that is never contended costs no deque.
    """

    __slots__ = ("readers", "writer", "waiting")

    def __init__(self) -> None:
        self.readers = 0
        self.writer: Op | None = None
        self.waiting: deque | None = None

    def __repr__(self) -> str:
        n = len(self.waiting) if self.waiting else 0
        return f"<Var readers={self.readers} writer={self.writer!r} waiting={n}>"


class Op:
    """What the bookkeeping needs to know about an op.

    Attributes:
        reads: vars the op reads (and does not write).
        writes: vars the op writes (reading them too is implied).
        out: a *fresh* var the op creates (``y`` in ``y = x + 1``), or None.  It is a write that
            needs no rules: nothing can have touched a var before the op that creates it, so it
            is granted at once (and costs no tuple).
        wait: vars that have not yet granted access; the op is ready at 0.
    """

    __slots__ = ("reads", "writes", "out", "wait")

    def __init__(self, reads: tuple = (), writes: tuple = (), out: Var | None = None) -> None:
        self.reads = reads
        self.writes = writes
        self.out = out
        self.wait = 0


def split_access(reads: Iterable[Var], writes: Iterable[Var]) -> tuple[tuple, tuple]:
    """Deduplicate: a var listed twice counts once, and a var both read and written is a write.

    Returns:
        ``(reads, writes)`` as tuples, in first-seen order.
    """
    w = tuple(dict.fromkeys(writes))
    ws = set(map(id, w))
    r = tuple(v for v in dict.fromkeys(reads) if id(v) not in ws)
    return r, w


def finish_write(var: Var, granted: list) -> None:
    """The write at the head of ``var`` finished; append to ``granted`` the ops admitted."""
    var.writer = None
    line = var.waiting
    while line:
        op, is_write = line.popleft()
        if is_write:
            var.writer = op
            if var.readers == 0:
                granted.append(op)
            break
        var.readers += 1
        granted.append(op)


def push_op(op: Op) -> bool:
    """Register all of ``op``'s accesses (``op.reads``/``op.writes`` already split) and its fresh
    output: the "push R" and "push W" rules above, and sets ``op.wait``.

    Returns:
        True when the op is ready at once (every var granted access).
    """
    wait = 0
    for v in op.reads:  # push R
        if v.writer is None:
            v.readers += 1
        else:
            if v.waiting is None:
                v.waiting = deque()
            v.waiting.append((op, False))
            wait += 1
    for v in op.writes:  # push W
        if v.writer is None:
            v.writer = op
            if v.readers:
                wait += 1
        else:
            if v.waiting is None:
                v.waiting = deque()
            v.waiting.append((op, True))
            wait += 1
    if op.out is not None:  # a fresh var: nothing touched it before, so granted at once
        op.out.writer = op
    op.wait = wait
    return wait == 0


def _release_write(v: Var, granted: list | None) -> list | None:
    """The "finish W" rule for one var: admit who waits (into ``granted``, made on first need) or
    free it.  Returns ``granted``."""
    if v.waiting:
        if granted is None:
            granted = []
        finish_write(v, granted)
    else:
        v.writer = None
    return granted


def finish_op(op: Op) -> list:
    """Release ``op``'s accesses: the "finish R" and "finish W" rules above.

    Returns:
        The ops that became ready (``wait`` dropped to 0), in grant order; a new list, empty when
        none did.
    """
    granted = None  # most finishes grant nothing: no list to make
    for v in op.reads:  # finish R
        v.readers -= 1
        if v.readers == 0 and v.writer is not None:
            if granted is None:
                granted = []
            granted.append(v.writer)
    for v in op.writes:  # finish W
        granted = _release_write(v, granted)
    if op.out is not None:  # the fresh output is a write like the others
        granted = _release_write(op.out, granted)
    ready = []
    if granted:
        for o in granted:
            o.wait -= 1
            if o.wait == 0:
                ready.append(o)
    return ready
