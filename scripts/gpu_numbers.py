"""The chapter's GPU numbers, measured on this machine's CUDA torch (``make gpu-check``'s numbers step).

Each measurement runs on its own; one that raises is recorded with its error and the others still
run.  Writes one JSON file (``--out``) and prints one line per measurement:

* ``sizing``: the CPU's launch costs, a synchronize's round trip and the GPU's kernel times that
  :mod:`d2l_async.experiments.sizing` measures, and the size each CUDA lesson gets from them.
* ``increments``: 10000 ``x += 1`` on a one-element CUDA tensor, synchronizing after each vs once at
  the end (notebook 05; the book's 3.4x), with the notebook's lesson checks.
* ``launch_queue_cap``: how many launches of a tiny kernel fit behind a running kernel before
  ``cudaLaunchKernel`` itself blocks (the launch queue's cap, "about 1024"), timed launch by launch.
* ``capture_queue``: the same filled queue captured with :func:`d2l_async.capture.capture` and read
  back with :func:`d2l_async.analysis.queue_length_summary` (the reader must see the cap too).
* ``kineto_tables``: the categories and launch calls this torch's profiler writes, against the reader's
  tables (a call missing from ``LAUNCH_CALLS`` would leave its kernels out of the queue length).
* ``nccl_all_reduce``: ``all_reduce`` of 4M floats, blocking vs ``async_op=True`` (two ranks on two
  GPUs; one rank on one GPU otherwise, where the collective has nobody to wait for).  Last, and its ranks
  given :data:`NCCL_LAUNCH_S`: a slow NCCL start must not cost the numbers before it.

The JSON file is written after every measurement (to a temporary file, then renamed), so a run that is
stopped -- its time limit, a hang -- still leaves every number measured until then.

Exit status 1 when a measurement raised, else 0.  Needs CUDA; run it from the repository root.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Seconds the NCCL measurement's ranks get to start and finish (the whole step has a budget to share).
NCCL_LAUNCH_S = 60


def _checks(cs: Any) -> list[dict[str, Any]]:
    return [{"name": c.name, "holds": bool(c.holds), "shown": c.shown, "otherwise": "" if c.holds else c.otherwise}
            for c in cs]


def increments() -> dict[str, Any]:
    import d2l_async.experiments as E

    r = E.run_sync_async(ops=10_000, numel=1, repeat=3, backend="cuda")
    return {"ops": r.ops, "sync_s": r.sync.median, "async_s": r.async_.median, "ratio": r.ratio,
            "t1_s": r.model.t1, "t2_s": r.model.t2, "t3_s": r.model.t3, "device": r.device,
            "checks": _checks([*r.lessons(), r.queue_lesson()])}


def sizing() -> dict[str, Any]:
    from d2l_async.experiments import device_sizes

    return device_sizes(refresh=True).to_dict()


def _sleep_cycles(seconds: float) -> int:
    """Clock cycles of ``torch.cuda._sleep`` that spin the GPU for about ``seconds``."""
    import torch

    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    cycles = 10_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    per_s = cycles / (start.elapsed_time(end) / 1e3)
    return int(per_s * seconds)


_FOUND: dict[str, int] = {}


def launch_queue_cap() -> dict[str, Any]:
    import numpy as np
    import torch

    x = torch.zeros(1, device="cuda")
    x.add_(1)
    cycles = _sleep_cycles(1.0)
    n = 4000
    times = np.empty(n)
    torch.cuda.synchronize()
    torch.cuda._sleep(cycles)  # about 1 s of GPU time: every launch after it waits in the queue
    for i in range(n):
        t0 = time.perf_counter()
        x.add_(1)
        times[i] = time.perf_counter() - t0
    torch.cuda.synchronize()
    slow = np.flatnonzero(times > 0.02)
    out = {"launches": n, "median_launch_s": float(np.median(times)), "longest_launch_s": float(times.max())}
    if len(slow):
        _FOUND["cap"] = int(slow[0])
        out.update(cap=int(slow[0]), blocked_launch_s=float(times[slow[0]]))
    else:
        out.update(cap=None, note=f"no launch blocked for 20 ms within {n} launches behind a 1 s kernel")
    return out


def capture_queue() -> dict[str, Any]:
    import torch

    from d2l_async.analysis import blocked_time, queue_length_summary
    from d2l_async.capture import capture

    x = torch.zeros(1, device="cuda")
    cap = _FOUND.get("cap", 1024)
    cycles = _sleep_cycles(0.3)

    def fill() -> None:
        torch.cuda._sleep(cycles)
        for _ in range(cap + 200):
            x.add_(1)

    trace = capture(fill)
    q = queue_length_summary(trace)
    blocked = blocked_time(trace)
    return {"launched": cap + 201, "kernels": int((trace["kind"] == "kernel").sum()),
            "max_queue": int(q["max"].max()) if len(q) else 0, "timed_cap": _FOUND.get("cap"),
            "blocked_s": float(blocked["total"].sum()) if len(blocked) else 0.0,
            "lanes": [lane.name for lane in trace.backend_lanes]}


def nccl_all_reduce() -> dict[str, Any]:
    import torch

    from d2l_async.experiments import run_collective
    from d2l_async.experiments.collective import checks as collective_checks

    if torch.cuda.device_count() >= 2:
        r = run_collective(ranks=2, backend="nccl", numel=1 << 22, repeats=5, timeout=NCCL_LAUNCH_S)
        return {"ranks": 2, "blocking_s": list(r.blocking_s), "return_s": list(r.return_s), "done_s": list(r.done_s),
                "compute_s": list(r.compute_s), "correct": r.correct, "checks": _checks(collective_checks(r))}
    from d2l_async.distributed._common import run_and_load
    from d2l_async.distributed.ranks import collective_rank

    out, _ = run_and_load(collective_rank, 1, backend="nccl", labels=("collective",), timeout=NCCL_LAUNCH_S,
                          options={"numel": 1 << 22, "size": 512, "repeats": 5})
    v = out.values[0]
    return {"ranks": 1, **{k: v[k] for k in ("blocking_s", "return_s", "done_s", "compute_s", "correct")},
            "note": "one rank on one GPU: the collective has no peer to wait for"}


def kineto_tables() -> dict[str, Any]:
    """What this torch's profiler writes for common CUDA work, against the reader's tables: categories
    it does not know, and calls that put work on a device but are not in LAUNCH_CALLS (the queue length
    would leave their work out, as cuLaunchKernelEx once was)."""
    import collections
    import os
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    from d2l_async.trace._kineto import CATEGORIES, LAUNCH_CALLS, SKIPPED_CATEGORIES

    y = torch.randn(1024, 1024, device="cuda")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        z = (y @ y).relu()
        z.sum().item()
        with torch.cuda.stream(side):
            (y * 2).sum()
        y.cpu()
        torch.zeros(1 << 20, device="cuda")
        torch.nn.functional.linear(y, y, y[0])  # cuBLASLt (bias epilogue)
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    os.unlink(path)
    xs = [e for e in events if e.get("ph") == "X"]
    cats = collections.Counter(str(e.get("cat")) for e in xs)
    known = {c.lower() for c in (*CATEGORIES, *SKIPPED_CATEGORIES, "python_function", "user_annotation")}
    device = {e.get("args", {}).get("correlation"): e.get("name") for e in xs
              if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    launchers = collections.Counter(e["name"] for e in xs if e.get("cat") in ("cuda_runtime", "cuda_driver")
                                    and e.get("args", {}).get("correlation") in device)
    return {"categories": dict(cats), "unknown_categories": sorted(c for c in cats if c.lower() not in known),
            "calls_with_device_work": dict(launchers),
            "not_launch_calls": sorted(n for n in launchers if n not in LAUNCH_CALLS),
            "copies": sorted({n for n in device.values() if str(n).startswith("Memcpy")})}


#: In the order they run: NCCL last (its ranks' start-up is the slowest and least predictable part).
MEASUREMENTS: dict[str, Callable[[], dict[str, Any]]] = {
    "kineto_tables": kineto_tables, "sizing": sizing, "increments": increments, "launch_queue_cap": launch_queue_cap,
    "capture_queue": capture_queue, "nccl_all_reduce": nccl_all_reduce,
}


def write(path: Path, result: dict[str, Any]) -> None:
    """Write ``result`` to ``path`` whole or not at all (a temporary file beside it, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="build/gpu/gpu_numbers.json")
    p.add_argument("--only", nargs="*", choices=list(MEASUREMENTS), default=list(MEASUREMENTS))
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_numbers: torch.cuda.is_available() is False: nothing measured")
        return 0
    from d2l_async.devices import describe_machine

    result: dict[str, Any] = {"machine": describe_machine(), "torch": torch.__version__, "cuda": torch.version.cuda,
                              "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}
    out = Path(args.out)
    order = [name for name in MEASUREMENTS if name in args.only]
    result["pending"] = list(order)
    write(out, result)  # the machine, before anything can hang
    failed = False
    for name in order:
        t0 = time.perf_counter()
        try:
            result[name] = MEASUREMENTS[name]()
        except Exception as exc:  # noqa: BLE001 - one failing measurement must not hide the others
            failed = True
            result[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        result[name]["seconds"] = time.perf_counter() - t0
        result["pending"].remove(name)
        write(out, result)  # after every measurement: a later hang or time limit keeps this one
        shown = {k: v for k, v in result[name].items() if k not in ("checks", "traceback")}
        print(f"{name}: {json.dumps(shown, default=str)[:600]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
