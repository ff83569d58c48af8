"""Which line of the frontend's code caused an engine event.

A blocker in a notebook is only useful if it points at the line that blocked (``print(z)`` in
cell 3).  :func:`user_source` walks out of the engine's own frames (and the ``Benchmark`` timer's,
whose barrier is the user's ``with`` line) and returns the first caller's ``(filename, lineno)``:
a few attribute reads, cheap enough to do per push while recording.  Code elsewhere in
``d2l_async`` counts as the frontend's: an experiment's ``eng.waitall()`` line is the line to
show, not the notebook line that called the experiment.  The text of the line is looked up later,
once, by :func:`format_source` (``linecache`` also knows IPython's cells).
"""

from __future__ import annotations

import linecache
import os
import sys
from types import FrameType

__all__ = ["user_frame", "user_source", "format_source", "add_internal_dir"]

_ENGINE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # .../d2l_async/engine/
_BENCHMARK = os.path.join(os.path.dirname(os.path.dirname(_ENGINE_DIR)), "benchmark.py")
_INSIDE: dict[str, bool] = {}  # co_filename -> engine-internal?  (one lookup per frame)
_INTERNAL_DIRS: tuple[str, ...] = (_ENGINE_DIR,)


def add_internal_dir(path: str) -> None:
    """Count frames under ``path`` as the engine's own, not the user's (plain-torch asynchrony,
    adds its package and torch's: the user's line is the one that called torch)."""
    global _INTERNAL_DIRS
    path = os.path.abspath(path).rstrip(os.sep) + os.sep
    if path not in _INTERNAL_DIRS:
        _INTERNAL_DIRS = (*_INTERNAL_DIRS, path)
        _INSIDE.clear()


def user_frame(depth: int = 2) -> FrameType | None:
    """The innermost frame outside the engine (None if none).  Read what you need from it at once
    and do not keep it: a frame keeps its locals (tensors) alive.

    Args:
        depth: the frame to start from (``sys._getframe(depth)`` here: 1 is the caller).  Callers
            on a fixed path, like ``x + 1``, know where the user's frame is and skip the walk; a
            start inside the engine walks outwards from there.
    """
    try:
        f = sys._getframe(depth)
    except ValueError:
        f = sys._getframe(1)
    inside = _INSIDE
    while f is not None:
        filename = f.f_code.co_filename
        flag = inside.get(filename)
        if flag is None:
            path = os.path.abspath(filename)
            flag = inside[filename] = path.startswith(_INTERNAL_DIRS) or path == _BENCHMARK
        if not flag:
            return f
        f = f.f_back
    return None


def user_source(depth: int = 2) -> tuple[str, int] | None:
    """``(filename, lineno)`` of :func:`user_frame` (``depth`` counted from the caller, as there)."""
    f = user_frame(depth + 1)
    return None if f is None else (f.f_code.co_filename, f.f_lineno)


def _cell_name(filename: str) -> str | None:
    """``"In[5]"`` for a notebook cell's code, as IPython's own tracebacks name it; else None.

    IPython is consulted only if the reader's process already imported it (never imported here).
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    compiler = getattr(shell, "compile", None)
    try:
        named = compiler.format_code_name(filename) if compiler is not None else None
    except Exception:  # noqa: BLE001 - an older IPython without it: fall back to the file name
        named = None
    return named[1] if named else None


def format_source(src: tuple[str, int] | None) -> str:
    """``"file.py:12: print(z)"``, or ``"In[5]:12: print(z)"`` for a notebook cell."""
    if not src:
        return ""
    filename, lineno = src
    code = linecache.getline(filename, lineno).strip()
    short = _cell_name(filename) or (os.path.basename(filename) if os.path.exists(filename) else filename)
    return f"{short}:{lineno}: {code}" if code else f"{short}:{lineno}"
