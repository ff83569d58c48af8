"""A block's ``TorchDispatchMode``, and which blocks are open on this thread.

:func:`current_runtime` is the innermost open ``asynchronous()`` block of the calling thread
(``_local.stack``); :class:`_AsyncMode` sends every op of that thread to its runtime.
"""

from __future__ import annotations

import threading

from torch.utils._python_dispatch import TorchDispatchMode

from ._runtime import AsyncRuntime

__all__ = ["current_runtime"]

_local = threading.local()  # .stack: this thread's open runtimes, innermost last


class _AsyncMode(TorchDispatchMode):
    """Every op of this thread goes to ``rt.dispatch``."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # torch wraps handlers in a dynamo guard: 9 us per op
        return False

    def __init__(self, rt: AsyncRuntime) -> None:
        super().__init__()
        self.rt = rt

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.rt.dispatch(func, args, kwargs or {})


def current_runtime() -> AsyncRuntime | None:
    """The innermost open ``asynchronous()`` block of this thread (None outside one).

    Returns:
        The innermost open block's :class:`AsyncRuntime`, or ``None`` outside any block on this thread.
    """
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None
