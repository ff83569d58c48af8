"""One entry point for every trace format the package reads: the reader is chosen by the content.

=========================================  ==========================================================
what ``path`` is                           read with
=========================================  ==========================================================
a jax.profiler ``log_dir`` or its file     :func:`~d2l_async.trace.read_jax_trace` (``/host:CPU``
(``perfetto_trace.json.gz``)               process in the file's first megabyte)
another folder                             :func:`~d2l_async.trace.read_trace_dir` (one file a rank)
any other file                             :func:`~d2l_async.trace.read_chrome_trace` (torch.profiler,
                                           Kineto of any generation, this package's own exports)
=========================================  ==========================================================
"""

from __future__ import annotations

import os
from pathlib import Path

from .._args import path as as_path
from ._chrome import read_chrome_trace
from ._jax import find_jax_file, looks_like_jax, read_jax_trace
from ._model import Trace, TraceError
from ._ranks import read_trace_dir

__all__ = ["read_trace"]


def read_trace(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> Trace:
    """Load a trace file or folder with the reader its content asks for (table in the module docstring).

    Args:
        path: a trace file (plain or gzip JSON), a jax.profiler ``log_dir``, or a folder of per-rank
            torch.profiler files.
        max_bytes: the most bytes of JSON to read from one file (default: what fits in memory now).

    Returns:
        The :class:`Trace` the chosen reader returns (its ``meta["source"]`` says which: ``"jax"``,
        ``"chrome"``, or a merged trace of ranks).

    Raises:
        TraceError: as the chosen reader raises it (a missing file, a format no reader knows, ...).
    """
    p = as_path("path", path)
    if p.is_dir():
        try:
            file = find_jax_file(p)
        except TraceError:
            return read_trace_dir(p, max_bytes=max_bytes)
        return read_jax_trace(file, max_bytes=max_bytes)
    if looks_like_jax(p):
        return read_jax_trace(p, max_bytes=max_bytes)
    return read_chrome_trace(p, max_bytes=max_bytes)
