"""Record the two-rank gloo trace pair committed next to this script (torch CPU build).

    .venv/bin/python tests/trace/data/record_gloo_pair.py tests/trace/data/gloo_pair

Two processes (gloo backend, TCP on localhost) each run a few steps of a tiny linear model with
an all_reduce of the gradient, under ``torch.profiler`` with a schedule (so the files are
multi-step, ``ProfilerStep#N`` ranges), and write ``rank{r}.json.gz``.  Kineto puts
``distributedInfo`` (backend, rank, world_size) in each file.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
from pathlib import Path


def _run(rank: int, world: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    w = torch.randn(64, 64, requires_grad=True)
    sched = schedule(wait=0, warmup=1, active=3, repeat=1)
    path = Path(out) / f"rank{rank}.json"
    with profile(activities=[ProfilerActivity.CPU], schedule=sched,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(4):
            x = torch.randn(32, 64)
            loss = (x @ w).relu().sum()
            loss.backward()
            dist.all_reduce(w.grad)
            with torch.no_grad():
                w -= 0.01 * w.grad / world
                w.grad = None
            prof.step()
    dist.destroy_process_group()
    with open(path, "rb") as src, gzip.open(str(path) + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()


def main(out: str) -> None:
    import torch.multiprocessing as mp

    Path(out).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    mp.spawn(_run, args=(2, out), nprocs=2, join=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent / "gloo_pair"))
