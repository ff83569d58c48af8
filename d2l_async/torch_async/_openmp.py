"""The frontend's OpenMP threads, freed while a block is open (Linux, GNU libgomp).

torch runs a kernel's parallel loops on an OpenMP *team* of the thread that calls it: the frontend
has one (made by the eager code before the block), and each worker makes its own.  GNU libgomp
lets an idle team thread spin for the next parallel region only while the process has no more
team threads than CPUs; otherwise it sleeps at once, and every parallel region must wake it.  On 2
cores the frontend's team and a worker's are one thread too many: a 256 x 256 ``relu`` took
38--64 us on a worker thread against 4 us on the frontend, and 3.6 us on the worker once the
frontend's team was freed; the book's MLP (20 steps) drained in 58--63 ms instead of 89.

While a block is open the frontend runs no kernel -- each one is queued for a worker -- so its
team only costs.  libgomp's ``omp_pause_resource_all(omp_pause_soft)`` frees the *calling*
thread's team (its threads end; other threads' teams are untouched), and the frontend's next
parallel kernel after the block starts a new one.  Thread counts do not change, so results stay
bitwise eager's.  Where torch uses another OpenMP runtime (Intel's, LLVM's on macOS) or none,
nothing is done.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

import torch

__all__ = ["free_frontend_team"]

_OMP_PAUSE_SOFT = 1  # omp.h: omp_pause_soft = 1, omp_pause_hard = 2
_FOUND: list[Any] = []  # [the C function, or None]: looked up once per process


def _pause_function() -> Any:
    """``omp_pause_resource_all`` of the libgomp torch loaded, or None (not Linux, not libgomp,
    a libgomp older than GCC 9)."""
    if _FOUND:
        return _FOUND[0]
    fn = None
    if sys.platform.startswith("linux"):
        paths = set()
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    parts = line.split(None, 5)  # address perms offset dev inode path
                    if len(parts) == 6 and "libgomp" in os.path.basename(parts[5]):
                        paths.add(parts[5].strip())
        except OSError:
            pass
        own = os.path.dirname(torch.__file__)
        # torch's own copy first (pip wheels bundle one); a system libgomp where torch links that
        for path in sorted(paths, key=lambda p: not p.startswith(own)):
            try:
                fn = ctypes.CDLL(path).omp_pause_resource_all  # already loaded: the same handle
            except (OSError, AttributeError):
                continue
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
            break
    _FOUND.append(fn)
    return fn


def free_frontend_team() -> bool:
    """Free the calling thread's OpenMP team threads; True if libgomp did (see the module)."""
    fn = _pause_function()
    return fn is not None and fn(_OMP_PAUSE_SOFT) == 0
