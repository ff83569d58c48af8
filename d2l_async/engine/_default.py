"""The module-level default engine, and waiting for every live engine.

Notebooks should create their engine explicitly (``with ThreadedEngine() as eng:``); the default
engine exists for quick experiments and for :func:`d2l_async.benchmark.synchronize`, which calls
:func:`waitall_all` so that a timed block is billed for the work it queued.
"""

from __future__ import annotations

import atexit
import os
import threading

from typing import TYPE_CHECKING

from ..config import engine_kind
from ._scheduler import live_engines

if TYPE_CHECKING:
    from ._engine import NaiveEngine, ThreadedEngine

__all__ = ["get_engine", "waitall_all"]

_default: "ThreadedEngine | NaiveEngine | None" = None
_default_lock = threading.Lock()


def get_engine() -> "ThreadedEngine | NaiveEngine":
    """The default engine, created on first use: ``ThreadedEngine()``, or ``NaiveEngine()`` when
    ``D2L_ASYNC_ENGINE=naive``.  A shut-down default engine is replaced by a new one."""
    global _default
    from ._engine import NaiveEngine, ThreadedEngine  # torch loads here, not at import

    with _default_lock:
        if _default is None or _default.closed:
            _default = NaiveEngine() if engine_kind() == "naive" else ThreadedEngine()
        return _default


def _forget_default() -> None:
    """In a child made by os.fork(): the parent's default engine is an orphan there (._fork), so the
    child's first ``get_engine()`` makes its own."""
    global _default, _default_lock
    _default, _default_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_default)


def waitall_all(timeout: float | None = None) -> None:
    """``waitall()`` on every engine that is not shut down (raising their deferred errors).

    Args:
        timeout: seconds each engine may take before :class:`TimeoutError` (None: no limit).
    """
    for eng in live_engines():
        eng.waitall(timeout=timeout)


@atexit.register
def _shutdown_all() -> None:
    # workers are daemon threads, so exit never hangs; this stops them cleanly when it can
    for eng in live_engines():
        try:
            eng.shutdown(wait=False, timeout=1.0)
        except Exception:  # noqa: BLE001 - at exit there is no one left to tell
            pass
