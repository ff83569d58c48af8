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

**Under load it is the other way round**, and by far.  The spin that makes a freed team fast is
the team's idle threads busy-waiting for the next parallel region; a spinning thread is always
runnable, so the scheduler never moves it to an idle CPU the way it places a thread it wakes.
Beside one ``taskset -c 0 python -c 'while 1: pass'`` a queued 256 x 256 ``relu`` took 4,675 us
freed against 205 us kept (eager: 225), beside two 19,727 against 201; on the shared machine at
load 6-8, 155 against 71.  With ``GOMP_SPINCOUNT=0`` (no spin) the freed team took 69 us, as kept;
with ``OMP_WAIT_POLICY=active`` (always spin) both took about 195 us: the spin is the whole
difference (benchmarks/bench_torch_async.py, "kernels" and "kernels beside a busy process").

So the default, ``free_frontend_team="auto"``, frees the team only when the workers' torch
threads and every other runnable task of the machine fit in the CPUs this process may use as the
block opens (:func:`others_runnable`: the run queue of ``/proc/loadavg`` less this process's own
running threads; on 2 cores and 2 threads: nothing else runnable): a wrong "keep" costs tens of
microseconds per small parallel kernel, a wrong "free" milliseconds.  The decision holds for the
block (a load that starts later is not seen); ``True``/``False`` force it.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

import torch

__all__ = ["free_frontend_team", "others_runnable", "should_free", "AUTO"]

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


AUTO = "auto"  #: free_frontend_team's default: decided when the block opens (see the module)


def _own_running() -> int:
    """This process's threads in state R (``/proc/self/task/*/stat``)."""
    own = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        own += stat[stat.rindex(")") + 2] == "R"  # the state follows the (name)
    return own


def others_runnable() -> int | None:
    """Tasks of other processes runnable right now (Linux ``/proc``); None where it cannot be read.

    ``/proc/loadavg``'s fourth field counts every runnable task of the machine, the reader
    included; this process's own running threads (``/proc/self/task/*/stat``, state R) are
    subtracted -- the frontend's spinning OpenMP threads are its own, not load.  The own threads are
    counted just before and just after the machine's count and the smaller count is taken: a thread
    of ours that became runnable between the two reads is not taken for another process's absence.

    Returns:
        The count (0 or more), or None without ``/proc``.
    """
    try:
        before = _own_running()
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
        own = min(before, _own_running())
    except (OSError, ValueError, IndexError):
        return None
    return max(0, running - own)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity: ``taskset`` counts)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def should_free(setting: bool | str, threads: int, cpus: int, others: int | None) -> bool:
    """Whether a block frees the frontend's team (a pure function of what it was given).

    ``setting``: True/False (forced) or :data:`AUTO`; ``threads``: the workers' torch threads
    (one thread makes no team, so nothing is gained); ``cpus``: :func:`usable_cpus`; ``others``:
    :func:`others_runnable` (None: unknown, so kept)."""
    if threads <= 1:
        return False
    if setting is not AUTO and setting != AUTO:
        return bool(setting)
    return others is not None and others + threads <= cpus
