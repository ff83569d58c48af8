"""Rank functions only the tests use (a spawned rank imports them by name, so they live in a module)."""

from __future__ import annotations

import os
import time

from d2l_async.distributed import RankContext


def rank_info(ctx: RankContext) -> dict:
    import torch
    import torch.distributed as dist

    # on the rank's own device: NCCL reduces only CUDA tensors, gloo CPU ones
    x = torch.tensor([float(ctx.rank)], device=ctx.device)
    dist.all_reduce(x)
    return {"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": float(x), "pid": os.getpid()}


def sleeping_rank(ctx: RankContext) -> None:
    time.sleep(600)  # the parent's deadline or a Ctrl-C must end this


def vanishing_rank(ctx: RankContext) -> None:
    if ctx.rank == 1:
        os._exit(3)  # dies without a word: a segfault, the OOM killer
    time.sleep(600)


def segfaulting_rank(ctx: RankContext) -> None:
    """Rank 1 dies of SIGSEGV after joining; the others then fail in a collective ("peer gone")."""
    import signal

    import torch
    import torch.distributed as dist

    dist.barrier()
    if ctx.rank == 1:
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(60)
    x = torch.ones(1)
    for _ in range(1000):
        dist.all_reduce(x)
        time.sleep(0.01)


def unpicklable_rank(ctx: RankContext):
    import threading

    return {"rank": ctx.rank, "lock": threading.Lock()}
