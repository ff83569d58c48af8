"""The asynchronous dependency engine: a frontend that pushes, workers that run, and waits.

This is the machinery behind the book's section on asynchronous computation (D2L §13.2), rebuilt
on threads so that it is real on any CPU machine.  It uses only the standard library: torch
appears one layer up (:mod:`._array`), where tensors are made.

The frontend (your Python code) never runs an op.  It *pushes* a description of the op -- what to
call, which arrays it reads and which it writes -- and returns at once.  Each virtual device
(``"cpu:0"``, ``"cpu:1"``: threads standing in for devices, not hardware) has a queue of ready ops
and ``workers`` threads of its own that take ops from it.  Reading a result (``print(z)``,
``z.asnumpy()``) is a *blocker*: the frontend waits until the op that wrote ``z`` has run.

Life of an op (the state machine)::

             push               booked            all vars granted          a worker takes it
  frontend -------> INBOX -----------------> WAITING ---------------> READY ------------------> RUNNING
                  (a deque,      (its reads/writes   (deps not met)   (its device's                |
                  no lock)       joined the vars'         ^            queue)                       v
                                 lines, see ._deps)       |                              DONE  or  FAILED
                                                          '-- finishing an op grants     (error kept,
                                                              the ops behind it          raised at the
                                                                                         next blocker)

State kept by the engine.  ``inbox`` is appended to without a lock (``deque.append`` is atomic);
everything else is guarded by one lock, ``_lock``::

    inbox           ops pushed but not yet booked, in push order
    _booked         ops booked and not finished (WAITING + READY + RUNNING)
    _running        ops a worker is running now
    _done/_failed   ops finished, without / with an error
    device.queue    READY ops of that device, first in first out
    device.idle     workers of that device asleep on ``device.cond`` that nobody woke yet
    var state       per array: readers, writer, waiting line (._deps: the pure rules)
    var.producer    the last pushed op that writes the array: a blocker on the array waits for it
    _unreported     errors ``waitall`` has not raised yet (it raises each once)

Workers *book* the inbox (:meth:`Scheduler._book`) each time they take the lock, before they take
an op.  So a push is an append and a check -- no lock, no Event, no list growing with readers --
and the frontend and the workers do not queue up behind each other on the lock.  A push takes the
lock only to wake an idle worker of the op's device.  A worker sleeps only when its queue is
empty; a blocker sleeps only when its op has not finished.  torch kernels release the GIL, so the
frontend's Python and the workers' kernels overlap.

Two details keep this honest under threads and Ctrl-C:

* No wake-up is lost: a worker announces itself idle *before* it looks at the inbox a last time;
  the frontend appends *before* it looks at ``idle``.  Each writes and then reads, so at least one
  of them sees the other.  (Idle workers also look again every ``IDLE_RECHECK`` seconds.)
* The frontend never changes the dependency state: only workers do, and a KeyboardInterrupt is
  only ever raised in the main thread.  Ctrl-C in the middle of a push loop or a wait leaves the
  engine consistent; the naive engine, whose frontend runs the ops, books them in ``_drain``,
  one thread at a time, and never keeps a Ctrl-C as an array's error.

The rest of the engine core lives beside this module: the waits (:mod:`._waits`), shutting down
and cancelling (:mod:`._shutdown`), and what keeps a student from wedging the engine -- waits
inside an op (:mod:`._guard`), the workers' weak hold on a dropped engine (:mod:`._worker`),
the naive engine's bookkeeping shielded from Ctrl-C (:mod:`._shield`), and what a child
made by ``os.fork()`` inherits: an orphan that refuses at its next use (:mod:`._fork`).

What an op costs (``benchmarks/bench_engine.py``; CPU time on the 2-core machine this was built
on, where eager ``y = x + 1`` costs about 3 us): a push about 1.3 us (2.3 us while recording), a
worker's bookkeeping about 1.3 us (2.3 us while recording) on top of the torch call it makes.  In
Python there is one more cost: every pending op keeps two objects alive (the op and its output
array; see ``EngineOp.out``), and a few tens of thousands of them make the garbage collector run a
full collection of the whole heap -- torch's included, about 0.1 s here -- every other run of
10,000 ops.  MXNet's C++ engine had no such bill.
"""

from __future__ import annotations

import itertools
import threading
from array import array
import time
import weakref
from collections import deque
from typing import TYPE_CHECKING, Callable, Sequence

from .._args import workers as check_workers
from ._completion import Completion
from ._deps import finish_op, finish_write, push_op
from ._errors import EngineError
from ._fork import forked_error, install as _install_fork_hook
from ._guard import inside, inside_op, observer_failed as _observer_failed
from ._op import _READY, _RUNNING, Device, EngineOp, EngineStatistics, parse_devices
from ._shield import FrontCondition, expose, shield, shield_ctrl_c
from ._shutdown import Shutdown
from ._source import user_frame
from ._waits import WAIT_SLICE, Waits, _limit_left, _take
from ._worker import IDLE_RECHECK, abandoned, worker_loop

if TYPE_CHECKING:  # the observer module imports the trace model (numpy); the core does not
    from ._observer import Observer

__all__ = ["Scheduler", "live_engines", "WAIT_SLICE", "IDLE_RECHECK"]

_perf = time.perf_counter


_LIVE: "weakref.WeakSet[Scheduler]" = weakref.WeakSet()


def live_engines() -> list["Scheduler"]:
    """Engines that have been created and not shut down.

    Returns:
        A new list of the live engines, in no particular order (they are held weakly: an engine nobody references
        drops out).
    """
    return [e for e in list(_LIVE) if not e.closed]


class Scheduler(Completion, Waits, Shutdown):
    """The engine core: inbox, queues, workers, waits and statistics.  Ops are built by subclasses.

    Args:
        devices: virtual device names, ``"cpu:N"``.
        workers: worker threads *per device* (ignored with ``inline``).
        max_pending: block ``push`` while this many ops are pending (None: unbounded).
        observers: receive push/ready/start/finish/block calls (see :mod:`._observer`).
        inline: run each op at push time on the calling thread (MXNet's NaiveEngine).
        thread_init: called once at the start of each worker thread (e.g. to set torch's threads).
    """

    engine_kind = "threaded"
    #: the parent's pid in a child made by os.fork() after this engine started (._fork); else 0
    _forked_from = 0

    def __init__(self, *, devices: Sequence[str] = ("cpu:0",), workers: int = 1,
                 max_pending: int | None = None, observers: Sequence["Observer"] = (),
                 inline: bool = False, thread_init: Callable[[], None] | None = None) -> None:
        names = parse_devices(devices)
        if not inline:  # worker threads per device, as many as this machine can start (.._args.max_workers)
            workers = check_workers("workers", workers, per=len(names))
        if max_pending is not None and (isinstance(max_pending, bool) or not isinstance(max_pending, int)
                                        or max_pending < 1):
            raise ValueError(f"max_pending={max_pending!r}: pass a positive int, or None for no bound")
        self._lock = threading.Lock()
        self._front = FrontCondition(self._lock)  # the frontend waits here (ops, space); see ._shield
        self._devices = {n: Device(n, i, self._lock) for i, n in enumerate(names)}
        self.workers = 0 if inline else workers
        self.max_pending = max_pending
        self._inline = inline
        self.set_observers(observers)
        self._inbox: deque[EngineOp] = deque()
        self._ids = itertools.count()
        self._booked = self._running = self._done = self._failed = 0
        self._bytes_pending = 0
        self._waitall_waiting = 0
        self._space_waiting = 0
        self._unreported: list[EngineOp] = []
        self._blocked = 0.0
        self._t0 = _perf()
        self.closed = False
        self._thread_init = thread_init
        self._cancelled = 0  # ops dropped by a cancel (shutdown(wait=False), an exception in `with`)
        self._token = object()  # what a thread running this engine's ops carries (._guard.inside)
        self._serial = threading.RLock()  # naive engine: one thread runs ops at a time (_drain);
        # an RLock for ``_is_owned``: whether a Ctrl-C landed just before or after taking it
        self._inline_ready: deque[EngineOp] = deque()  # naive engine: ready ops, run in this order
        # workers hold a weak reference (._worker.worker_loop), so a dropped engine can be collected;
        # the finalizer stops them then, and warns (it refers to the devices, not to the engine)
        ref = weakref.ref(self)
        for dev in self._devices.values():
            for k in range(self.workers):
                dev.threads.append(threading.Thread(
                    target=worker_loop, args=(ref, dev, k, self._token, thread_init), daemon=True,
                    name=f"d2l_async {dev.name} worker {k}"))
        self._finalizer = None
        if self.workers:
            self._finalizer = weakref.finalize(self, abandoned, tuple(self._devices.values()), self._lock,
                                               f"a {type(self).__name__} with devices {list(names)}")
            self._finalizer.atexit = False  # at exit ._default stops live engines, without a warning
        for dev in self._devices.values():
            for t in dev.threads:
                t.start()
        _LIVE.add(self)

    def set_observers(self, observers: Sequence["Observer"]) -> None:
        """Replace the observers (subclass hook, frontend thread; ``()``: no observer, no stamps).

        Keeps, per moment, the bound methods to call: an observer may name the moments it needs
        in ``hooks``; the others are not called at all.
        """
        self._observers = tuple(observers)

        def bound(name: str) -> tuple:
            return tuple(getattr(o, name) for o in self._observers if name in getattr(o, "hooks", (name,)))

        self._on_push, self._on_ready = bound("on_push"), bound("on_ready")
        self._on_start, self._on_finish = bound("on_start"), bound("on_finish")
        self._on_block_begin, self._on_block_end = bound("on_block_begin"), bound("on_block_end")

    # -- devices ---------------------------------------------------------------------------
    @property
    def devices(self) -> tuple[str, ...]:
        """The names of this engine's virtual devices, in the order given."""
        return tuple(self._devices)

    def device_record(self, name: str | None) -> Device:
        """The :class:`Device` record an op is queued on (subclass hook: ``EngineOp(device=...)``).

        Returns:
            The record of the virtual device ``name``; of the first device when ``name`` is None.

        Raises:
            ValueError: ``name`` is not one of this engine's devices.
        """
        if name is None:
            return next(iter(self._devices.values()))
        try:
            return self._devices[name]
        except (KeyError, TypeError):
            raise ValueError(f"device {name!r} is not one of this engine's virtual devices "
                             f"{list(self._devices)}; create the engine with devices=(...)") from None

    # -- pushing ---------------------------------------------------------------------------
    def submit(self, op: EngineOp, depth: int = 2) -> None:
        """Push ``op`` and return at once: the per-op cost of every ``y = x + 1``, so every line counts.

        The subclass hook for pushing (:mod:`d2l_async.engine.core`): called on the frontend thread,
        with **no lock held**.  An override may add frontend bookkeeping before calling
        ``super().submit(op, depth + 1)`` exactly once; it must not change ``op.reads``/``op.writes``
        after that call (a worker may book the op at once) and must not wait.

        ``depth``: how many frames above this one the user's code is when the op comes by a fixed
        path (``x + 1``: 3, through ``__add__`` and ``_binary``); a hint for :func:`user_source`.

        Raises:
            EngineError: the engine is shut down.
        """
        if self.closed:
            raise EngineError("this engine is shut down; create a new one (use it in a `with` block)")
        if self._forked_from:
            raise forked_error("push", self._forked_from)
        obs = self._observers
        if obs:
            f = user_frame(depth + 1)
            if f is not None:
                op.file = f.f_code.co_filename
                op.line = f.f_lineno
            else:
                op.file, op.line = "", 0
            del f  # a frame keeps the user's locals alive
            op.t_launch = _perf()
        if self.max_pending is not None:
            self._wait_for_space()
        op.id = next(self._ids)
        if obs:
            op.t_issue = _perf()
            for f in self._on_push:
                try:  # zero cost unless it raises: an observer must not kill a worker
                    f(op)
                except Exception as exc:  # noqa: BLE001
                    _observer_failed(exc)
        self._inbox.append(op)
        for v in op.writes:
            v.producer = op  # frontend-only field: what a blocker on v waits for
        if op.out is not None:
            op.out.producer = op
        if self._inline:
            self._drain()
        elif op.device.idle:  # a worker to wake (see "No wake-up is lost" above)
            dev = op.device
            with self._lock:
                if dev.idle:
                    dev.cond.notify()
                    dev.idle -= 1

    def _book(self) -> None:
        """Move the inbox into the vars' lines (lock held); queue the ops that are ready."""
        inbox = self._inbox
        obs = self._on_ready
        while inbox:
            op = inbox.popleft()
            self._booked += 1
            dev = op.device
            dev.pending += 1
            self._bytes_pending += op.nbytes
            if self._observers:
                self._record_deps(op)
            if push_op(op):
                self.queue_ready(op, obs)

    def queue_ready(self, op: EngineOp, obs: tuple, first: bool = False) -> None:
        """Queue a ready op on its device: last in line, or ``first`` (a wait for the data that
        runs no work, torch_async's escapes); tell the observers ``obs``, wake a worker.

        The subclass hook for *when* a granted op may start (:mod:`d2l_async.engine.core`): called
        with the engine's **lock held**, by a worker or by the frontend of a naive engine, once per
        op, when its last var granted access.  An override may hold an op back and queue it later
        from another call of this hook, but every op must reach ``super().queue_ready(op, obs)``
        exactly once (an op held forever hangs its blockers); it must not take the lock, wait, or
        run user code.  Pass ``obs`` through unchanged (the observers' ``on_ready`` methods).
        """
        op.state = _READY
        dev = op.device
        if self._inline:  # the pushing thread runs it (_drain), in the order ops became ready
            self._inline_ready.append(op)
            for f in obs:
                try:  # zero cost unless it raises: an observer must not kill a worker
                    f(op)
                except Exception as exc:  # noqa: BLE001
                    _observer_failed(exc)
            return
        if first:
            dev.queue.appendleft(op)
        else:
            dev.queue.append(op)
        for f in obs:
            try:  # zero cost unless it raises: an observer must not kill a worker
                f(op)
            except Exception as exc:  # noqa: BLE001
                _observer_failed(exc)
        if dev.idle:
            dev.cond.notify()
            dev.idle -= 1

    def _record_deps(self, op: EngineOp) -> None:
        """Dependency edges for the trace: the last write of each var, and for a write the reads
        since then.  Only while recording (these lists grow with readers; the scheduler's state
        does not)."""
        deps = []
        for v in op.reads:
            if v.last_write >= 0:
                deps.append(v.last_write)
            if v.read_ids is None:
                v.read_ids = array("q")  # 8 bytes a read: 1M reads of one x are 8 MB, not 36
            v.read_ids.append(op.id)
        for v in op.writes:
            if v.last_write >= 0:
                deps.append(v.last_write)
            if v.read_ids:
                deps.extend(v.read_ids)
            v.read_ids = None
            v.last_write = op.id
        if op.out is not None:
            op.out.last_write = op.id
        op.deps = tuple(deps) if len(deps) < 2 else tuple(dict.fromkeys(deps))

    @property
    def t0(self) -> float:
        """``time.perf_counter()`` when the engine was created: the zero of its traces' times."""
        return self._t0

    def has_pending(self) -> bool:
        """True while an op is pushed and not finished (taken under the lock: a consistent answer)."""
        with self._lock:
            return bool(self._booked or self._inbox)

    def mark_raised(self, error: BaseException) -> None:
        """``error`` was raised to the reader at a blocker: ``waitall`` will not raise it again.

        Subclass hook for a blocker of its own; takes the lock (do not hold it).
        """
        with self._lock:
            if self._unreported:
                self._unreported = [o for o in self._unreported if o.error is not error]

    def _wait_for_space(self) -> None:
        """Back-pressure: block while ``max_pending`` ops are pending (recorded as "full queue")."""
        if len(self._inbox) + self._booked < self.max_pending:
            return
        if inside_op(self._token):  # a push from inside an op never waits: the op that would make
            return                  # room is the one pushing (it waited on itself)
        if self._forked_from:
            raise forked_error("a full queue", self._forked_from)
        t0 = _perf()
        self._block_begin("full queue", t0)
        try:
            with self._lock:
                self._space_waiting += 1
                try:
                    while len(self._inbox) + self._booked >= self.max_pending:
                        left = _limit_left()  # a run's time limit
                        self._front.wait(WAIT_SLICE if left is None else min(left, WAIT_SLICE))
                finally:
                    self._space_waiting -= 1
        finally:
            t1 = _perf()
            self._blocked += t1 - t0
            self._block_end("full queue", t1, ())

    # -- running ---------------------------------------------------------------------------
    # A worker's loop is ._worker.worker_loop: it holds the engine by a weak reference while asleep.
    # It calls _book, _execute and _finish below; _execute is where an op runs (and where a modelled
    # device holds it, see ._modelled).

    def _drain(self, deadline: float | None = None) -> None:
        """The naive engine's worker: run every pushed op on this thread, as each becomes ready.

        A push from inside an op only joins the inbox and runs after that op returns, as on the
        threaded engine (running it at once ran it before the op that writes its input).
        Pushes from several threads are serialized by ``_serial``: one thread runs ops at a time;
        waiting for it honours ``deadline`` (a ``timeout=``).  The bookkeeping here is shielded
        from Ctrl-C (:mod:`._shield`): an interrupt is raised in the op being run or
        just after the bookkeeping, never half-way through it.
        """
        if inside_op(self._token):
            return
        shield_ctrl_c()
        serial = self._serial
        prev = getattr(inside, "token", None)
        try:
            _take(serial, deadline)  # exposed: a Ctrl-C gets through while another thread runs ops
            inside.token = self._token
            ready = self._inline_ready
            while True:
                with self._lock:
                    if self._inbox:
                        self._book()
                    if not ready or self.closed:
                        return
                    op = ready.popleft()
                    op.state = _RUNNING
                    self._running += 1
                    op.device.running += 1
                try:
                    self._execute(op, 0)
                except BaseException as exc:  # noqa: BLE001 - a Ctrl-C just before or after the op
                    if op.error is None:
                        op.error = exc
                    if self._observers:  # it may have missed its stamps: the recorder reads them
                        for stamp in ("t_start", "t_end"):
                            if not hasattr(op, stamp):
                                setattr(op, stamp, _perf())
                        op.worker = 0
                with self._lock:
                    self._finish(op)
                if isinstance(op.error, KeyboardInterrupt):  # Ctrl-C inside an inline op: stop now
                    raise op.error
        finally:
            inside.token = prev
            if serial._is_owned():  # taken (a Ctrl-C may land just after acquire returned)
                serial.release()

    def _forget(self) -> None:
        """No longer a live engine (``live_engines``): called once it is shut down."""
        _LIVE.discard(self)

    # -- state -----------------------------------------------------------------------------
    def statistics(self) -> EngineStatistics:
        """Returns a consistent :class:`EngineStatistics` snapshot of the counters (taken under the
        lock; ops still in the inbox count as pending)."""
        with self._lock:
            inbox = list(self._inbox)  # one C call: a consistent copy even while the frontend pushes
            per_device = {n: d.pending for n, d in self._devices.items()}
            for op in inbox:
                per_device[op.device.name] += 1
            return EngineStatistics(
                pending=self._booked + len(inbox), running=self._running, done=self._done,
                failed=self._failed, device_pending=per_device,
                bytes_pending=max(0, self._bytes_pending + sum(op.nbytes for op in inbox)),
                blocked_seconds=self._blocked, elapsed=_perf() - self._t0)


# Ctrl-C and the bookkeeping (._shield): an interrupt that arrives in these is raised
# just after them; one that arrives in an op the naive engine runs, or in a wait, is raised there.
shield(Scheduler.submit, Scheduler._book, Scheduler.queue_ready, Scheduler._record_deps, Scheduler._drain,
       Scheduler._finish, Scheduler._failed_op, Scheduler._interrupted, push_op, finish_op, finish_write)
expose(Scheduler._execute, Scheduler._wait_for_space, _take)
# in a child made by os.fork(), every live engine is orphaned: a clear error at its next use (._fork)
_install_fork_hook(_LIVE)
