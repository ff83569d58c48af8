"""The engine's exceptions, and how an op's error is raised again for whoever waits.

An op runs on a worker thread; its exception cannot travel up the frontend's stack.  The engine
keeps it and raises it at the next *blocker* (``wait_to_read``, ``asnumpy``, ``print``, ...) on the
array the op wrote, or on anything computed from it, and once at ``waitall`` -- MXNet's deferred
errors, and ``concurrent.futures.Future.result`` in CPython.  What is raised has the original type
and message, with the original exception (and its worker traceback) chained as ``__cause__``.
"""

from __future__ import annotations

import copy

__all__ = ["EngineError", "deferred"]


class EngineError(RuntimeError):
    """Misuse of an engine (pushing to a shut-down engine, a wait that timed out internally, ...),
    or an op's error whose type could not be rebuilt."""


def deferred(exc: BaseException, where: str) -> BaseException:
    """A fresh exception of ``exc``'s type and arguments, with a note saying where it came from.

    Raise it with ``raise deferred(exc, ...) from exc`` so the worker traceback is chained.  A new
    object is made each time: raising the stored one at every blocker would pile up tracebacks.

    Args:
        exc: the exception an op raised on a worker.
        where: a sentence for the note, e.g. ``"op 'div' (#12), raised at wait_to_read"``.

    Returns:
        The new exception (``exc``'s type, or :class:`EngineError` naming it when that type cannot be copied), with
        no traceback of its own, ``exc``'s notes and one more saying where it was deferred from.
    """
    try:
        new = copy.copy(exc)  # same type and args, via __reduce_ex__
        if type(new) is not type(exc):
            raise TypeError
    except Exception:  # an exception class whose constructor cannot be replayed
        new = EngineError(f"{type(exc).__name__}: {exc}")
    new.__traceback__ = None
    # copy.copy shares the __notes__ list with the original; give the copy its own
    new.__notes__ = list(getattr(exc, "__notes__", ()))
    new.add_note(f"d2l_async.engine: deferred from {where}; the worker's traceback is chained above")
    return new
