"""Inside a rank: what :func:`~._launch.launch` starts in each process, and what it receives.

A rank joins the process group from the environment (as under ``torchrun``), runs the function,
and reports its value -- checked to be picklable here, where the reason can still be told -- or its
error with the formatted traceback.  It ends with the launching process, however that ends
(:mod:`._watchdog`).  torch is imported inside the functions: the launching process never
loads it for this module.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["RankContext", "run_rank"]


@dataclass(frozen=True)
class RankContext:
    """What a rank function receives: who it is and where to put its traces.

    Attributes:
        rank: this process's rank, 0 .. world_size - 1.
        world_size: how many ranks run.
        backend: ``"gloo"`` or ``"nccl"``.
        device: ``"cpu"`` (gloo) or ``"cuda:<rank>"`` (NCCL: each rank its own GPU).
        trace_dir: folder for this run's per-rank profiler traces (``None``: do not profile).
        options: the keyword arguments :func:`launch` passed on.
    """

    rank: int
    world_size: int
    backend: str
    device: str
    trace_dir: str | None
    options: Mapping[str, Any] = field(default_factory=dict)


def _die_with_parent(parent_pid: int) -> None:
    """End this rank when the launching process ends, even by SIGKILL: no orphans.

    A watchdog thread waits on the launching process (:mod:`._watchdog`).  A rank the fork server
    started also asks Linux for SIGTERM when the server dies (PR_SET_PDEATHSIG: it fires when the
    parent *thread* ends, and the server's is its only one; a spawned rank's parent thread may be
    a short-lived one of the launcher's, so it relies on the watchdog alone)."""
    from ._watchdog import watch

    if os.getppid() != parent_pid:  # started by the fork server
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # not Linux: the watchdog alone
            pass
    watch(parent_pid)  # ends this rank at once if the launching process is already gone


def _rank_main(fn: Callable[[RankContext], Any], ctx: RankContext, port: int, results: Any, parent_pid: int) -> None:
    _die_with_parent(parent_pid)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(ctx.rank),
                      WORLD_SIZE=str(ctx.world_size), LOCAL_RANK=str(ctx.rank))
    try:
        value = run_rank(fn, ctx)
        _check_picklable(value, fn)
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
        results.put(("error", ctx.rank, type(exc).__name__, str(exc), traceback.format_exc(), time.time()))
        results.close()
        results.join_thread()
        os._exit(1)  # skip atexit/gloo teardown that could hang on a peer that is gone
    results.put(("ok", ctx.rank, value))
    results.close()
    results.join_thread()


def _check_picklable(value: Any, fn: Any) -> None:
    """Raise here, in the rank, when its value cannot travel to the parent (the queue's
    feeder thread pickles it later, and its failure only printed; the parent heard nothing)."""
    from multiprocessing.reduction import ForkingPickler

    try:
        ForkingPickler.dumps(value)
    except Exception as exc:  # noqa: BLE001 - any pickling failure
        raise TypeError(f"{getattr(fn, '__qualname__', fn)} returned a {type(value).__name__} that cannot be "
                        f"pickled, so it cannot be sent to the launching process ({type(exc).__name__}: {exc}); "
                        "return plain data (numbers, lists, dicts, tensors)") from exc


def run_rank(fn: Callable[[RankContext], Any], ctx: RankContext) -> Any:
    """Join the process group (from the environment, as under ``torchrun``), run ``fn``, leave it."""
    import datetime

    import torch
    import torch.distributed as dist

    if ctx.backend == "nccl":
        torch.cuda.set_device(int(ctx.device.split(":")[1]))
    torch.set_num_threads(1)  # ranks share the machine's cores; one intra-op thread each
    # NCCL: bind the group to the rank's GPU (torch >= 2.3), so barrier() and the communicators never guess it
    bound = {"device_id": torch.device(ctx.device)} if ctx.backend == "nccl" else {}
    dist.init_process_group(ctx.backend, rank=ctx.rank, world_size=ctx.world_size,
                            timeout=datetime.timedelta(seconds=60), **bound)
    value = fn(ctx)
    # only on success: a failing rank that closed its connections first would make its peers fail
    # with "connection closed" before its own error reached the parent
    dist.destroy_process_group()
    return value
