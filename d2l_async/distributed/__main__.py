"""Run the chapter's rank functions under ``torchrun``, on one machine or many.

On each machine (here two machines with 4 GPUs each; ``HOST`` is the first machine's address)::

    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        -m d2l_async.distributed overlap --trace-dir traces/

``torchrun`` starts the processes and sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT``; this entry point reads them, joins the process group (NCCL when
the machine has a GPU for every local rank, else gloo), runs the same function the notebook's
:func:`~d2l_async.distributed.launch` runs, and writes each profiled section to
``<trace-dir>/<section>/rank<R>.json``.  Copy the folders of all machines into one and load it::

    read_trace_dir("traces/bucketed")   # one lane group per rank

Every rank prints one JSON line with what its function returned; the first rank on each machine
(``LOCAL_RANK`` 0) then prints one line saying where the traces went and how to load them::

    traces of ranks 0-1 in /abs/path/traces: after_backward/ bucketed/ (rank<R>.json each); load one with
    d2l_async.trace.read_trace_dir('/abs/path/traces/bucketed')
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ._launch import RankContext, run_rank
from .ranks import DEFAULT_NUMEL, DEFAULT_SIZE, collective_rank, training_rank

__all__ = ["main", "options_for"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m d2l_async.distributed",
                                description="Run one of the chapter's distributed workloads on this rank "
                                            "(start it with torchrun; see the module docstring).")
    p.add_argument("experiment", choices=("collective", "overlap", "straggler"),
                   help="collective: all_reduce(async_op=True) and work.wait(); overlap: gradients all-reduced "
                        "after backward vs DDP's buckets during it; straggler: one slow rank makes every rank wait")
    p.add_argument("--trace-dir", default="d2l_async_traces", help="where each rank writes <section>/rank<R>.json (default d2l_async_traces)")
    p.add_argument("--no-profile", action="store_true", help="write no traces")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                   help="process-group backend; auto: NCCL when this machine has a GPU for every local rank, "
                        "else gloo (default auto)")
    p.add_argument("--bucket-cap-mb", type=float, default=1.0,
                   help="DDP's gradient bucket size in MB (default 1.0; DDP's own default is 25)")
    p.add_argument("--delay-ms", type=float, default=50.0, help="straggler: the last rank's sleep per step (default 50)")
    p.add_argument("--width", type=int, default=512, help="overlap/straggler: the MLP's hidden width (default 512)")
    p.add_argument("--depth", type=int, default=6, help="overlap/straggler: the MLP's hidden layers (default 6)")
    p.add_argument("--batch", type=int, default=128, help="overlap/straggler: samples per rank per step (default 128)")
    p.add_argument("--steps", type=int, default=8,
                   help="training steps per setting (collective: repeats of the all-reduce); default 8")
    p.add_argument("--numel", type=int, default=DEFAULT_NUMEL[0],
                   help=f"collective: floats all-reduced (default {DEFAULT_NUMEL[0]}, as run_collective)")
    p.add_argument("--size", type=int, default=DEFAULT_SIZE[0],
                   help=f"collective: side of the matmul overlapped with the all-reduce (default {DEFAULT_SIZE[0]}, "
                        "as run_collective: sized so the product takes about as long as the reduction)")
    return p


def options_for(args: argparse.Namespace, world_size: int) -> tuple[Any, dict[str, Any]]:
    """The rank function and its options for the parsed command line."""
    if args.experiment == "collective":
        return collective_rank, {"numel": args.numel, "size": args.size, "repeats": args.steps}
    work = {"width": args.width, "depth": args.depth, "batch": args.batch, "steps": args.steps, "warmup": 1,
            "profile_steps": 1}
    cap = args.bucket_cap_mb
    if args.experiment == "overlap":
        settings = [{"label": "after_backward", "mode": "after_backward"},
                    {"label": "bucketed", "mode": "bucketed", "bucket_cap_mb": cap}]
    else:
        slow = {"delay_s": args.delay_ms / 1e3, "slow_rank": world_size - 1}
        settings = [{"label": "even", "mode": "bucketed", "bucket_cap_mb": cap},
                    {"label": "straggler", "mode": "bucketed", "bucket_cap_mb": cap, **slow}]
    return training_rank, {**work, "settings": settings}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]  # noqa: B018 - torchrun sets both
    except KeyError as exc:
        print(f"{exc.args[0]} is not set: start this with torchrun, e.g. torchrun --nproc-per-node 2 -m "
              "d2l_async.distributed overlap (or use d2l_async.distributed.launch from Python)", file=sys.stderr)
        return 2
    import torch

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > local else "gloo"
    fn, options = options_for(args, world)
    ctx = RankContext(rank, world, backend, f"cuda:{local}" if backend == "nccl" else "cpu",
                      None if args.no_profile else args.trace_dir, options)
    value = run_rank(fn, ctx)
    line = json.dumps({"rank": rank, "world_size": world, "backend": backend, "result": value}) + "\n"
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line.encode())  # one write: ranks share the pipe, lines must not interleave
    if local == 0:
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        os.write(sys.stdout.fileno(), (_where_traces_went(ctx.trace_dir, rank, local_world) + "\n").encode())
    return 0


def _where_traces_went(trace_dir: str | None, first_rank: int, local_ranks: int) -> str:
    """The pointer line: this machine's ranks, the folder and its sections (the ones the first rank
    wrote), and the call that loads one.

    Returns:
        One line of text; with ``trace_dir`` None, that no traces were written.
    """
    if trace_dir is None:
        return "no traces written (--no-profile)"
    folder = os.path.abspath(trace_dir)
    sections = sorted(d for d in os.listdir(folder) if os.path.isfile(os.path.join(folder, d, f"rank{first_rank}.json"))) \
        if os.path.isdir(folder) else []
    ranks = f"{first_rank}-{first_rank + local_ranks - 1}" if local_ranks > 1 else f"{first_rank}"
    if not sections:
        return f"no traces found in {folder} for rank {first_rank}"
    return (f"traces of ranks {ranks} in {folder}: {' '.join(s + '/' for s in sections)} (rank<R>.json each); "
            f"load one with d2l_async.trace.read_trace_dir({os.path.join(folder, sections[-1])!r})")


if __name__ == "__main__":
    raise SystemExit(main())
