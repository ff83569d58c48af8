"""A run's time limit: :func:`deadline` around a run, :func:`checkpoint` between its pushes.

A dashboard cannot know in advance how long a slider's setting takes on this machine (a guess up
front refused a 3.7 s run as "about 102 s" and let a 32 s run through a 30 s limit).  So a run
carries a :func:`deadline`, and the experiments' loops call :func:`checkpoint` between pushes: past
the limit, or once the run's own first steps show the whole run would pass it, the checkpoint raises
:class:`RunStopped`.  Raised inside an engine's ``with`` block, it cancels the ops not yet started,
so the stop is prompt; every engine wait inside the block keeps the limit too
(:func:`d2l_async.engine.wait_limit`).  Without a deadline a checkpoint costs one context-variable
read.

A deadline may also carry an ``abandon`` question, asked at most every :data:`ABANDON_EVERY_S` seconds
at a checkpoint: a dashboard asks "does a newer value of a control wait?", and a run whose result nobody
will look at stops there (:class:`RunSuperseded`) so the newer one starts sooner.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from .._args import number
from ..engine import wait_limit

__all__ = ["RunStopped", "RunSuperseded", "Deadline", "deadline", "checkpoint", "ABANDON_EVERY_S"]

#: How often (seconds) a checkpoint asks a deadline's ``abandon`` question: it reads the kernel's queue.
ABANDON_EVERY_S = 0.1


class RunStopped(RuntimeError):
    """A run passed its time limit (or was projected to) and was stopped at a :func:`checkpoint`.

    Attributes:
        elapsed: seconds the run had taken when it was stopped.
        limit: the limit in seconds.
        projected: the whole run's predicted seconds from its first steps (``None``: it simply
            passed the limit).
    """

    def __init__(self, message: str, *, elapsed: float, limit: float, projected: float | None = None) -> None:
        super().__init__(message)
        self.elapsed = elapsed
        self.limit = limit
        self.projected = projected


class RunSuperseded(RunStopped):
    """A run abandoned at a :func:`checkpoint` because its result is no longer wanted (a newer value waits)."""


@dataclass(frozen=True)
class Deadline:
    """A time limit for the run in progress (see :func:`deadline`).

    Attributes:
        limit_s: seconds the run may take.
        started: ``time.perf_counter()`` when the run began.
        min_progress_s: a projection from the first steps is trusted only after this many seconds.
        what: the run in words, for the message.
        abandon: asked at checkpoints (at most every :data:`ABANDON_EVERY_S`): a reason to abandon the
            run, or ``None`` to go on.
    """

    limit_s: float
    started: float
    min_progress_s: float = 1.0
    what: str = "this run"
    abandon: Callable[[], str | None] | None = None
    _asked: list = field(default_factory=lambda: [0.0], repr=False, compare=False)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def check(self, done: int | None = None, total: int | None = None, *, since: float | None = None) -> None:
        """Raise :class:`RunStopped` if the run passed its limit or, from ``done`` of ``total``
        steps so far (timed from ``since``, default the run's start), would pass it."""
        now = time.perf_counter()
        elapsed = now - self.started
        if self.abandon is not None and now - self._asked[0] >= ABANDON_EVERY_S:
            self._asked[0] = now
            reason = self.abandon()
            if reason:
                raise RunSuperseded(f"{self.what} was abandoned after {elapsed:.1f} s: {reason}",
                                    elapsed=elapsed, limit=self.limit_s)
        if elapsed > self.limit_s:
            raise RunStopped(f"{self.what} was stopped after {elapsed:.1f} s: it passed its {self.limit_s:.0f} s "
                             "limit. Choose smaller values.", elapsed=elapsed, limit=self.limit_s)
        if not (done and total and done < total):
            return
        phase = now - (self.started if since is None else max(since, self.started))
        if phase < self.min_progress_s:
            return
        projected = elapsed + phase * (total - done) / done
        if projected > self.limit_s:
            raise RunStopped(
                f"{self.what} was stopped after {elapsed:.1f} s: {done:,} of {total:,} steps took "
                f"{phase:.1f} s, so the whole run would take about {projected:.0f} s here, over "
                f"its {self.limit_s:.0f} s limit. Choose smaller values.",
                elapsed=elapsed, limit=self.limit_s, projected=projected)


_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("d2l_async_deadline", default=None)


@contextlib.contextmanager
def deadline(limit_s: float | None, *, what: str = "this run", min_progress_s: float = 1.0,
             abandon: Callable[[], str | None] | None = None) -> Iterator[Deadline | None]:
    """Give the code inside the block ``limit_s`` seconds; its :func:`checkpoint` calls enforce it.

    ``None`` means no limit.  Nested deadlines: the inner one applies inside its block.  ``abandon``
    (a callable returning a reason or ``None``) is asked at checkpoints too; a reason stops the run
    with :class:`RunSuperseded`.

    Raises:
        ValueError: a non-positive limit.
        TypeError: ``abandon`` is not callable.
    """
    min_progress_s = number("min_progress_s", min_progress_s, minimum=0)
    if abandon is not None and not callable(abandon):
        raise TypeError(f"abandon must be a callable returning a reason or None, got {type(abandon).__name__}")
    if limit_s is None and abandon is not None:
        limit_s = float("inf")
    if limit_s is None:
        token = _DEADLINE.set(None)
        try:
            with wait_limit(None):
                yield None
        finally:
            _DEADLINE.reset(token)
        return
    if isinstance(limit_s, bool) or not isinstance(limit_s, (int, float)) or not limit_s > 0:
        raise ValueError(f"limit_s must be a positive number of seconds, got {limit_s!r}")
    d = Deadline(float(limit_s), time.perf_counter(), float(min_progress_s), what, abandon)
    token = _DEADLINE.set(d)
    try:
        # every engine wait inside keeps the limit too: a waitall that drains the queue before the
        # next checkpoint could look would otherwise run past it
        until = None if d.limit_s == float("inf") else d.started + d.limit_s  # abandon alone: no wait limit
        with wait_limit(until, lambda: _stopped_waiting(d)):
            yield d
    finally:
        _DEADLINE.reset(token)


def _stopped_waiting(d: Deadline) -> RunStopped:
    elapsed = d.elapsed()
    return RunStopped(f"{d.what} was stopped after {elapsed:.1f} s, in a wait: it passed its {d.limit_s:.0f} s "
                      "limit. Choose smaller values.", elapsed=elapsed, limit=d.limit_s)


def checkpoint(done: int | None = None, total: int | None = None, *, since: float | None = None) -> None:
    """Stop the run here (:class:`RunStopped`) if its :func:`deadline` has passed, or if ``done``
    of ``total`` steps (timed from ``since``, a ``time.perf_counter()`` value) show it would;
    a no-op without a deadline.  Call it between pushes."""
    d = _DEADLINE.get()
    if d is not None:
        d.check(done, total, since=since)
