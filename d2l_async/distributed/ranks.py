"""What each rank runs: the chapter's three distributed workloads, and profiling a section of them.

These functions run *inside* the rank processes that :func:`~d2l_async.distributed.launch` spawns
(or under ``torchrun``, see ``python -m d2l_async.distributed --help``); they are top-level functions
of this module so that a spawned process can import them by name.  Each gets a
:class:`~d2l_async.distributed.RankContext`, reads its workload from ``ctx.options`` and returns a
small dict of numbers.  Sections wrapped in :func:`profiled` are recorded with ``torch.profiler``
and written to ``<trace_dir>/<label>/rank<r>.json`` — one folder per section, one file per rank,
the layout HolisticTraceAnalysis calls a ``trace_dir``.

* :func:`collective_rank` — ``all_reduce`` blocking vs ``async_op=True``: the call returns a
  ``Work`` handle at once, the frontend computes something independent, ``work.wait()`` is the
  per-variable barrier (notebook 3's ``wait_to_read``, now between processes).
* :func:`training_rank` — a small MLP trained data-parallel under several *settings* at once
  (same processes, same data, steps interleaved so that a drift of the machine hits all of them):
  ``after_backward`` all-reduces all gradients, flattened into one tensor, once the whole backward
  pass is done (one collective: the fewest messages possible, so that a faster bucketed step owes
  it to overlap, not to coalescing); ``bucketed`` is ``DistributedDataParallel`` with ``bucket_cap_mb``:
  each bucket's all-reduce starts as soon as its gradients exist, during the backward pass.  A
  setting may make one rank a straggler (``delay_s`` of sleep before each step).

torch is imported inside the functions: importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import copy
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ._launch import RankContext
from .._args import function, having, instance, integer

__all__ = ["DEFAULT_NUMEL", "DEFAULT_SIZE", "MODES", "STEP_LABEL", "collective_rank", "mlp", "profiled", "raising_rank",
           "training_rank"]

#: Floats :func:`collective_rank` reduces by default (default mode, quick mode): notebook 10's text
#: names the first.
DEFAULT_NUMEL = (1 << 20, 1 << 18)
#: Side of its independent product (default, quick): it takes at least as long as the reduction.
DEFAULT_SIZE = (640, 512)

#: How gradients are all-reduced in :func:`training_rank`.
MODES = ("after_backward", "bucketed")
#: The ``record_function`` range around each profiled training step (the trace keeps it per rank).
STEP_LABEL = "d2l_async step"


@contextlib.contextmanager
def profiled(ctx: RankContext, label: str, warmup: Callable[[], Any] | None = None) -> Iterator[None]:
    """Record the body with ``torch.profiler`` into ``<trace_dir>/<label>/rank<r>.json``.

    All ranks enter and leave together (a barrier on each side), so the per-rank windows line up.
    Does nothing but the barriers when ``ctx.trace_dir`` is None.

    Args:
        warmup: run once under the profiler before the body and left out of the trace (the
            profiler's schedule): the first collective a profiler records pays its set-up, 2-30 ms
            of an ``all_reduce(async_op=True)`` call that returns in 0.1 ms unprofiled.

    Yields:
        ``None``: the body runs between the barriers (and, with ``ctx.trace_dir``, inside the profiler's recorded
        step); the trace file is written after it.
    """
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    if not isinstance(label, str) or not label or "/" in label or "\\" in label:
        raise ValueError(f"label must be a non-empty folder name (str, no '/'), got {label!r}")
    if warmup is not None:
        function("warmup", warmup, what="a function of no arguments, or None")
    instance("ctx", ctx, RankContext, what="RankContext (the argument launch gives the rank function)")
    try:
        dist.barrier()
    except ValueError as exc:  # torch's "Default process group has not been initialized"
        if dist.is_initialized():
            raise
        raise RuntimeError(f"profiled(ctx, {label!r}) runs inside a rank function started by "
                           "d2l_async.distributed.launch, where the ranks' process group exists; this process has "
                           "none") from exc
    if ctx.trace_dir is None:
        yield
        dist.barrier()
        return
    from d2l_async.capture import quiet_kineto

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.backend == "nccl" else [])
    prof = profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=1) if warmup else None)
    with quiet_kineto():  # kineto's "profiler_start" lines would reach the notebook through fd 2
        prof.__enter__()
    if warmup is not None:
        warmup()
        _sync(ctx)
        dist.barrier()
        with quiet_kineto():  # the recording starts here
            prof.step()  # the warm-up step ends; the body is the one recorded step
    try:
        yield
        if ctx.backend == "nccl":
            torch.cuda.synchronize()  # every kernel of the section ends inside the window
    finally:
        with quiet_kineto():
            prof.__exit__(None, None, None)
    out = Path(ctx.trace_dir) / label
    out.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out / f"rank{ctx.rank}.json"))
    dist.barrier()


def _sync(ctx: RankContext) -> None:
    if ctx.backend == "nccl":
        import torch

        torch.cuda.synchronize()


def _sync_stream(ctx: RankContext) -> None:
    """Wait for this thread's current CUDA stream only: the matmul, not a collective in flight on NCCL's
    own stream (a device-wide synchronize waits for both, so the matmul's time would include the
    collective and "overlapping saved time" would always hold)."""
    if ctx.backend == "nccl":
        import torch

        torch.cuda.current_stream().synchronize()


def _ddp_options(ctx: RankContext) -> dict[str, Any]:
    """``DistributedDataParallel``'s device arguments: the rank's own GPU on NCCL, none on the CPU."""
    if ctx.backend != "nccl":
        return {}
    import torch

    index = torch.device(ctx.device).index
    return {"device_ids": [index], "output_device": index}


def collective_rank(ctx: RankContext) -> dict[str, Any]:
    """``all_reduce`` of ``numel`` floats: blocking, then ``async_op=True`` with independent work.

    Options: ``numel`` (floats reduced), ``size`` (side of the independent matmul), ``repeats``,
    ``peer_delay_s`` and ``slow_rank``: that rank sleeps ``peer_delay_s`` before each of its
    collectives (a slower peer: its data came late), so the other ranks' all-reduce waits for it --
    time in which an asynchronous call lets them compute, with no spare core needed (the peer sleeps).

    Returns:
        medians in seconds: ``blocking_s`` (the blocking call), ``return_s`` (the async call's
        return), ``done_s`` (from the call to ``work.wait()`` returning), ``compute_s`` (the
        independent matmul); the same per repeat as ``*_runs``; ``completed_at_return`` (how many
        repeats had finished by the time the call returned), ``correct`` (the sum is what it must be).
    """
    having("ctx", ctx, ("rank", "world_size", "options"), what="a RankContext (what launch() passes each rank)")
    import torch
    import torch.distributed as dist

    o = ctx.options
    numel, size, repeats = int(o.get("numel", 1 << 20)), int(o.get("size", 256)), int(o.get("repeats", 3))
    late = float(o.get("peer_delay_s", 0.0)) if ctx.rank == int(o.get("slow_rank", ctx.world_size - 1)) else 0.0
    dev = torch.device(ctx.device)
    x = torch.full((numel,), float(ctx.rank + 1), device=dev)
    a = torch.rand(size, size, device=dev)
    dist.all_reduce(x)  # warm-up: connections, buffers
    a @ a
    blocking, ret, done, compute, completed = [], [], [], [], 0
    for _ in range(repeats):
        x.fill_(float(ctx.rank + 1))
        dist.barrier()
        if late:
            time.sleep(late)  # the slower peer: its contribution arrives late
        t0 = time.perf_counter()
        dist.all_reduce(x)
        _sync(ctx)
        blocking.append(time.perf_counter() - t0)
        x.fill_(float(ctx.rank + 1))
        dist.barrier()
        if late:
            time.sleep(late)
        t0 = time.perf_counter()
        work = dist.all_reduce(x, async_op=True)  # returns a Work handle at once
        ret.append(time.perf_counter() - t0)
        completed += bool(work.is_completed())
        if late:  # the late peer waits for no one: its matmul after the reduction, not against it for the CPU
            work.wait()
        b = a @ a  # independent of x: may run while the collective is in flight
        _sync_stream(ctx)  # the matmul's stream only: the collective may still be running
        compute.append(time.perf_counter() - t0 - ret[-1])
        work.wait()  # the barrier for x alone
        _sync(ctx)
        done.append(time.perf_counter() - t0)
    expected = ctx.world_size * (ctx.world_size + 1) / 2
    correct = bool(torch.allclose(x, torch.full_like(x, expected)))
    x.fill_(float(ctx.rank + 1))
    with profiled(ctx, "collective", warmup=lambda: dist.all_reduce(x.clone(), async_op=True).wait()):
        if late:
            time.sleep(late)
        work = dist.all_reduce(x, async_op=True)
        if late:
            work.wait()
        b = a @ a
        work.wait()
        _sync(ctx)
    del b
    med = statistics.median
    return {"blocking_s": med(blocking), "return_s": med(ret), "done_s": med(done), "compute_s": med(compute),
            "blocking_runs": tuple(blocking), "done_runs": tuple(done), "compute_runs": tuple(compute),
            "completed_at_return": completed, "repeats": repeats, "correct": correct, "numel": numel,
            "late_s": late}


def _settings(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    settings = list(options.get("settings", ()))
    if not settings:
        raise ValueError("training_rank needs options['settings']: a list of {label, mode, bucket_cap_mb, delay_s}")
    for s in settings:
        if s.get("mode") not in MODES:
            raise ValueError(f"setting {s!r}: mode must be one of {MODES}")
    return settings


def mlp(width: int, depth: int, dev: Any) -> Any:
    """The MLP every rank trains: ``depth`` ReLU layers of ``width``, then one output, on ``dev``;
    the same initial weights on every rank.

    Returns:
        A ``torch.nn.Sequential``.

    Raises:
        ValueError: ``width`` or ``depth`` is not a positive int.
    """
    import torch

    width = integer("width", width, minimum=1, maximum=1 << 16)
    depth = integer("depth", depth, minimum=1, maximum=1024)
    torch.manual_seed(0)  # the same initial weights on every rank
    layers: list[Any] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 1)).to(dev)


def training_rank(ctx: RankContext) -> dict[str, Any]:
    """A data-parallel MLP step under each setting; step times and one profiled step each.

    Options: ``settings`` (list of dicts: ``label``, ``mode`` in :data:`MODES`, ``bucket_cap_mb``,
    ``delay_s``, ``slow_rank``), ``width``, ``depth``, ``batch``, ``warmup``, ``steps`` (timed,
    interleaved across settings), ``profile_steps``.

    Returns:
        ``{label: {"step_s": (seconds of each timed step), "checksum": sum of the parameters}}``;
        after the all-reduce every rank holds the same parameters, so checksums agree across ranks.
    """
    having("ctx", ctx, ("rank", "world_size", "options"), what="a RankContext (what launch() passes each rank)")
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    o = ctx.options
    settings = _settings(o)
    width, depth, batch = int(o.get("width", 256)), int(o.get("depth", 6)), int(o.get("batch", 64))
    warmup, steps, profile_steps = int(o.get("warmup", 1)), int(o.get("steps", 3)), int(o.get("profile_steps", 1))
    dev = torch.device(ctx.device)
    base = mlp(width, depth, dev)
    gen = torch.Generator().manual_seed(1000 + ctx.rank)  # each rank its own shard of data
    x = torch.randn(batch, width, generator=gen).to(dev)
    y = torch.randn(batch, 1, generator=gen).to(dev)
    runs = []
    for s in settings:
        net = copy.deepcopy(base)
        model = (DDP(net, bucket_cap_mb=float(s.get("bucket_cap_mb", 25.0)), **_ddp_options(ctx))
                 if s["mode"] == "bucketed" else net)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        delay = float(s.get("delay_s", 0.0)) if ctx.rank == int(s.get("slow_rank", ctx.world_size - 1)) else 0.0
        runs.append((s, net, model, opt, delay))

    def step(s: Mapping[str, Any], net: Any, model: Any, opt: Any, delay: float) -> None:
        if delay:
            time.sleep(delay)  # the straggler: slower data loading, a slower GPU, a busy host
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()  # bucketed: DDP all-reduces each bucket during this call
        if s["mode"] == "after_backward":  # only now, after the whole backward pass: all gradients in
            grads = [p.grad for p in net.parameters()]  # one message, the fewest collectives possible, so
            flat = torch.cat([g.reshape(-1) for g in grads])  # a faster bucketed step owes it to overlap
            dist.all_reduce(flat)
            flat /= ctx.world_size
            offset = 0
            for g in grads:
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()
        opt.step()
        _sync(ctx)

    for run in runs:
        for _ in range(warmup):
            step(*run)
    times: dict[str, list[float]] = {s["label"]: [] for s in settings}
    for _ in range(steps):
        for run in runs:  # interleaved: a change of the machine's load hits every setting alike
            dist.barrier()
            t0 = time.perf_counter()
            step(*run)
            times[run[0]["label"]].append(time.perf_counter() - t0)
    from torch.profiler import record_function

    for run in runs:
        with profiled(ctx, run[0]["label"]):
            for _ in range(profile_steps):
                with record_function(STEP_LABEL):  # each profiled step's window, read per step from the trace
                    step(*run)
    return {s["label"]: {"step_s": tuple(times[s["label"]]),
                         "checksum": float(sum(float(p.detach().double().sum()) for p in net.parameters()))}
            for s, net, *_ in runs}


def raising_rank(ctx: RankContext) -> None:
    """Rank ``fail_rank`` raises ``ValueError`` after ``after_s`` seconds; the others wait for it in
    a barrier they will never leave — the hang a real job shows when one rank dies.

    :func:`~d2l_async.distributed.launch` raises the error with this rank's traceback at once and
    ends the waiting ranks; nothing is left behind.
    """
    having("ctx", ctx, ("rank", "world_size", "options"), what="a RankContext (what launch() passes each rank)")
    import torch.distributed as dist

    if ctx.rank == int(ctx.options.get("fail_rank", 1)) % ctx.world_size:
        time.sleep(float(ctx.options.get("after_s", 0.0)))
        raise ValueError(f"rank {ctx.rank} gives up: a deliberate error, to see where it surfaces")
    dist.barrier()  # never returns: the failing rank does not come
