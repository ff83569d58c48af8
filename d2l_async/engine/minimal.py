"""The engine in one file: MXNet's dependency engine, small enough to read in ten minutes.

Notebook 2's arrays run on :class:`~d2l_async.engine.ThreadedEngine`; this is the same idea with
nothing around it::

    with Engine(devices=("cpu:0",), workers=2) as eng:
        x = eng.array(torch.ones(2, 2))
        z = x * x + 2          # two pushes: returns at once, a worker computes z
        x += 1                 # a write of x: waits until x * x has read x
        print(z)               # a blocker: waits for z's value

Every array has a :class:`Var`; every :class:`Op` lists the vars it reads and writes and counts in
``op.wait`` those that have not yet granted it access.  At 0 it is ready, and a worker thread of its
device runs it.  A var grants access in push order (``R`` a read, ``W`` a write)::

    push R:    no writer -> readers += 1, granted        (reads of one version run side by side)
               a writer  -> wait in line
    push W:    no writer -> writer = W, granted once readers == 0
               a writer  -> wait in line
    finish R:  readers -= 1; at 0 the writer is granted  (write after read)
    finish W:  admit from the line every read up to the next write; that write becomes the writer

Our names and MXNet's (``src/engine/threaded_engine.h``)::

    push_op: push R, push W       ThreadedVar::AppendReadDependency, AppendWriteDependency
    finish_op: finish R, W        ThreadedVar::CompleteReadDependency, CompleteWriteDependency
    Op.wait                       OprBlock::wait (at 0 the op goes to its device's queue)
    Engine.push                   Engine::PushAsync (each + - * @ of an Array pushes one op)
    Array.wait_to_read            NDArray::WaitToRead -> Engine::WaitForVar (a read op the frontend waits for)
    Engine.waitall                Engine::WaitForAll (mx.nd.waitall)
    asnumpy, item, print(x)       blockers: they call wait_to_read first
    Var.error, Engine._errors     ThreadedVar::var_exception, global_exception_refs_

What ``ThreadedEngine`` adds, and why: it *records* every push, start, end and wait, so the notebooks
can draw them; it keeps the frontend out of the dependency state (pushes go to an inbox the workers
book), so a Ctrl-C cannot stop it half-way through ``push_op`` as it can here; it refuses to run in a
child of ``os.fork()`` (no workers there: it would wait for ever); and it infers shapes at push (an
error shows at its own line), refuses a wait inside an op, bounds the queue, and stops the workers of
an engine nobody holds.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable

import torch

from .._args import sequence, workers as check_workers

__all__ = ["Array", "Engine"]


class Var:
    """One array's dependency state (MXNet's ``ThreadedVar``)."""

    def __init__(self) -> None:
        self.readers = 0        # granted reads that have not finished
        self.writer = None      # the write at the head of the line (granted once readers == 0)
        self.waiting = deque()  # (op, is_write) pushed behind the writer, first in first out
        self.error = None       # the exception of the op that last wrote this var


class Op:
    """A pushed op: ``fn`` to run on ``device`` once ``wait`` is 0, and the vars it reads and writes."""

    def __init__(self, fn: Callable[[], Any] | None, reads: Any, writes: Any, device: str | None = None) -> None:
        self.fn, self.device, self.wait, self.done, self.error = fn, device, 0, False, None
        self.writes = tuple(dict.fromkeys(writes))  # x += x writes x: writing implies reading
        self.reads = tuple(v for v in dict.fromkeys(reads) if v not in self.writes)


def push_op(op: Op) -> bool:
    """Join the op to its vars' lines (lock held).  Returns True when every var granted it access."""
    for v in op.reads:                      # push R
        if v.writer is None:
            v.readers += 1
        else:
            v.waiting.append((op, False))
            op.wait += 1
    for v in op.writes:                     # push W
        if v.writer is None:
            v.writer = op
            if v.readers:
                op.wait += 1
        else:
            v.waiting.append((op, True))
            op.wait += 1
    return op.wait == 0


def finish_op(op: Op) -> list[Op]:
    """Release the op's vars (lock held).  Returns the ops that became ready."""
    granted = []
    for v in op.reads:                      # finish R
        v.readers -= 1
        if v.readers == 0 and v.writer is not None:
            granted.append(v.writer)
    for v in op.writes:                     # finish W
        v.writer = None
        while v.waiting:
            o, is_write = v.waiting.popleft()
            if is_write:
                v.writer = o
                if v.readers == 0:
                    granted.append(o)
                break
            v.readers += 1
            granted.append(o)
    ready = []
    for o in granted:                       # one op may be granted by several of these vars
        o.wait -= 1
        if o.wait == 0:
            ready.append(o)
    return ready


class Engine:
    """``workers`` threads per device, a queue of ready ops per device, one lock for everything."""

    def __init__(self, *, devices: tuple[str, ...] = ("cpu:0",), workers: int = 1) -> None:
        self.devices = sequence("devices", devices, what="device names such as 'cpu:0'", empty=False)
        n = check_workers("workers", workers, per=len(self.devices))
        self._cond = threading.Condition()  # guards every var, op, queue and counter
        self._queues = {d: deque() for d in self.devices}
        self._pending, self._errors, self._closed = 0, [], False
        self._torch_threads = torch.get_num_threads()  # a reduction splits as the frontend's would
        self._threads = [threading.Thread(target=self._work, args=(d,), daemon=True,
                                          name=f"d2l_async minimal {d} worker {k}")
                         for d in self.devices for k in range(n)]
        for t in self._threads:
            t.start()

    def array(self, data: Any, *, device: str | None = None) -> Array:
        """Returns a new array holding a copy of ``data``, ready to read."""
        return Array(self, self._device(device), torch.as_tensor(data).clone())

    def push(self, fn: Callable[..., Any], *, reads: Any = (), writes: Any = (), device: str | None = None) -> Op:
        """Push an op: a worker calls ``fn(*read_values, *write_values)`` later.  Returns the Op at once."""
        arrays = (*reads, *writes)
        op = Op(lambda: fn(*[a.value for a in arrays]), [a.var for a in reads], [a.var for a in writes],
                self._device(device or (arrays[0].device if arrays else None)))
        with self._cond:
            if self._closed:
                raise RuntimeError("this engine is closed; create a new one")
            self._pending += 1
            if push_op(op):
                self._queues[op.device].append(op)
                self._cond.notify_all()
        return op

    def _work(self, device: str) -> None:
        torch.set_num_threads(self._torch_threads)  # per thread: the frontend's setting does not reach it
        queue = self._queues[device]
        while True:
            with self._cond:
                self._cond.wait_for(lambda: queue or self._closed)
                if self._closed:
                    return
                op = queue.popleft()
            op.error = next((v.error for v in (*op.reads, *op.writes) if v.error is not None), None)
            new_error = None
            if op.error is None:            # an op whose input failed does not run: it fails too
                try:                        # no lock held: the frontend and the workers go on
                    op.fn()
                except Exception as e:      # kept for a blocker: the error is deferred
                    op.error = new_error = e
            with self._cond:
                if new_error is not None:
                    self._errors.append(new_error)  # for waitall, which raises it once
                for v in op.writes:
                    v.error = op.error
                for o in finish_op(op):
                    self._queues[o.device].append(o)
                self._pending -= 1
                op.done = True
                self._cond.notify_all()

    def _wait(self, ready: Callable[[], Any], timeout: float | None) -> None:
        with self._cond:
            if not self._cond.wait_for(ready, timeout):
                raise TimeoutError(f"waited {timeout} s; {self._pending} ops still pending")

    def waitall(self, *, timeout: float | None = None) -> None:
        """Block until every pushed op has run; raise the first error no waitall raised yet."""
        self._wait(lambda: self._pending == 0, timeout)
        with self._cond:
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    pending = property(lambda self: self._pending, doc="Ops pushed and not finished yet.")

    def close(self, *, timeout: float | None = None) -> None:
        """Let the pushed ops finish (for at most ``timeout`` s), then stop the workers."""
        with self._cond:
            self._cond.wait_for(lambda: self._pending == 0, timeout)
            self._closed = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout)

    __enter__ = lambda self: self
    __exit__ = lambda self, error, *_: self.close(timeout=0 if error else None)  # on an error: stop now

    def _device(self, device: str | None) -> str:
        if device is not None and device not in self._queues:
            raise ValueError(f"device={device!r}: this engine's devices are {list(self.devices)}")
        return device or self.devices[0]


class Array:
    """A value an engine will compute (MXNet's ``NDArray``): arithmetic pushes an op and returns."""

    def __init__(self, engine: Engine, device: str, value: Any = None) -> None:
        self.engine, self.device, self.value, self.var = engine, device, value, Var()

    def _apply(self, method: str, *args: Any, out: Array | None = None, device: str | None = None) -> Array:
        out = out if out is not None else Array(self.engine, device or self.device)  # no value yet

        def run(*_: Any) -> None:           # the tensor's own method: bitwise what eager torch computes
            out.value = getattr(self.value, method)(*[a.value if isinstance(a, Array) else a for a in args])
            if out.value is NotImplemented:  # torch declined (x @ 2): Python would raise this
                raise TypeError(f"unsupported operand for {method}: {[type(a).__name__ for a in args]}")
        self.engine.push(run, reads=[a for a in (self, *args) if isinstance(a, Array)], writes=[out],
                         device=out.device)
        return out

    def to(self, device: str) -> Array:
        """Returns a copy on ``device`` at once; one of its workers makes it."""
        return self._apply("clone", device=self.engine._device(device))

    def wait_to_read(self, *, timeout: float | None = None) -> None:
        """Block until every op pushed so far that writes this array has run; raise its error."""
        if self.var.writer is not None:     # a write is pending: push a read, wait for its turn
            op = self.engine.push(lambda *_: None, reads=[self])
            self.engine._wait(lambda: op.done, timeout)
        if self.var.error is not None:
            raise self.var.error

    def _read(self) -> Any:
        self.wait_to_read()
        return self.value

    def asnumpy(self) -> Any:
        """A blocker.  Returns a NumPy copy of the value."""
        return self._read().numpy().copy()

    def item(self) -> Any:
        """A blocker.  Returns the value of a one-element array as a Python number."""
        return self._read().item()

    __format__ = lambda self, spec: format(self._read(), spec)  # print(x) and f"{x}" wait too
    __str__ = lambda self: str(self._read())
    __repr__ = lambda self: repr(self._read())
    shape = property(lambda self: self._read().shape, doc="A blocker: not inferred at push here.")
    dtype = property(lambda self: self._read().dtype, doc="A blocker, as ``shape``.")
    __array_ufunc__ = None  # np.float64(2) * x: NumPy leaves it to x.__rmul__, as for a tensor


def _pushed(method: str, *, inplace: bool = False) -> Callable[..., Array]:
    """``x + y``, ``x.sum()``, ``x += y``: the tensor's own method, pushed as an op."""
    return lambda self, *args: self._apply(method, *args, out=self if inplace else None)


for _m in [f"__{n}__" for n in "add sub mul truediv matmul pow radd rsub rmul rtruediv rmatmul rpow eq ne lt le "
           "gt ge neg".split()] + ["sum", "mean", "exp", "relu"]:
    setattr(Array, _m, _pushed(_m))               # a fresh output array
for _m in ("__iadd__", "__isub__", "__imul__", "__itruediv__"):
    setattr(Array, _m, _pushed(_m, inplace=True))  # x += y writes x
