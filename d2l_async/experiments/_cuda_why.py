"""Measured reasons for a lesson that did not hold on a GPU, in CUDA's terms (issue 18).

The CPU engine's reasons -- worker threads taking turns on a busy core, Python's interpreter lock --
do not apply to a CUDA run: there the backend is the GPU, which needs no CPU to compute.  What sets a
CUDA run's shape is read from its capture:

* **launch latency**: each ``cudaLaunchKernel`` costs the CPU a few µs; a kernel shorter than its launch
  finishes before the next one arrives, so the GPU keeps up and nothing queues;
* **queue depth**: launches issued but not started (HolisticTraceAnalysis's queue length);
* **the launch-queue cap**: CUDA holds about :data:`LAUNCH_QUEUE_CAP` pending launches per device; past
  that, ``cudaLaunchKernel`` itself waits for a slot, and the CPU can run no further ahead;
* **a synchronizing copy**: ``.item()``, ``.cpu()``, ``print`` copy to pageable host memory and wait for
  every kernel before them (``cudaMemcpyAsync`` that blocks, ``cudaStreamSynchronize``);
* **a busy GPU**: another process's kernels (``nvidia-smi``) delay ours; a capture shows only our own.

:func:`cuda_facts` reads these from a trace; :func:`why_not_ahead`, :func:`why_queue` and
:func:`explain` turn them into the sentences a ✘ shows.  Pure functions: no torch, no GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable

from ._common import backend_work, launches
from ._why import fmt_time

__all__ = ["LAUNCH_QUEUE_CAP", "CudaFacts", "cuda_facts", "why_not_ahead", "why_queue", "queue_full", "explain",
           "why_streams", "why_chain_ended"]

#: Pending launches CUDA queues per device before ``cudaLaunchKernel`` blocks (measured "about 1024" on
#: recent GPUs; ``make gpu-check`` measures it on the machine it runs on: gpu_numbers.json).
LAUNCH_QUEUE_CAP = 1024


@dataclass(frozen=True)
class CudaFacts:
    """What a CUDA capture says about its run.

    Attributes:
        launches: launch calls (kernels, copies and memsets put on a queue).
        launch_s: median seconds the CPU spent in one launch call that did not wait (a copy into
            pageable memory waits for the GPU inside its call: it counts in ``waits``).
        kernel_s: median seconds one piece of device work ran on the GPU.
        max_queue: the longest launch queue of any stream.
        waits: synchronizing calls inside the run: before its last launch (a final synchronize that ends
            a timed run, and the capture's own, are not in the way of anything).
        wait_s: seconds the CPU spent in them.
        slow_launches: launch calls over 5 times the median: waits for a free queue slot.
    """

    launches: int
    launch_s: float
    kernel_s: float
    max_queue: int
    waits: int
    wait_s: float
    slow_launches: int

    @property
    def at_cap(self) -> bool:
        """The queue reached the launch-queue cap (within 10%)."""
        return self.max_queue >= 0.9 * LAUNCH_QUEUE_CAP

    def sentence(self) -> str:
        return (f"{self.launches} launches of {fmt_time(self.launch_s)} each on the CPU, device work of "
                f"{fmt_time(self.kernel_s)} each on the GPU, longest launch queue {self.max_queue}")


def cuda_facts(trace: Any) -> CudaFacts:
    """:class:`CudaFacts` of a CUDA capture (any trace with launches and backend work)."""
    import numpy as np

    from ..analysis import queue_length_summary

    # every call that put work on a queue counts as a launch, a copy into pageable memory (a wait,
    # filed as a block) included; the launch latency is read from the calls that did not wait
    calls = launches(trace)
    plain = trace.where(kind="launch")
    work = backend_work(trace)
    blocks = trace.where(kind="block")
    last_launch = float(calls["start"].max()) if len(calls) else float("-inf")
    inside = np.array([not str(src).startswith("d2l_async.capture") and float(st) < last_launch
                       for src, st in zip(blocks["source"], blocks["start"])], dtype=bool)
    ldur = plain["end"] - plain["start"]
    launch_s = float(np.median(ldur)) if len(ldur) else float("nan")
    kernel_s = float(np.median(work["end"] - work["start"])) if len(work) else float("nan")
    summary = queue_length_summary(trace) if len(work) else None
    q = int(summary["max"].max()) if summary is not None and len(summary) else 0
    slow = int((ldur > 5 * launch_s).sum()) if len(ldur) and launch_s > 0 else 0
    wait = blocks["end"][inside] - blocks["start"][inside]
    return CudaFacts(len(calls), launch_s, kernel_s, q, int(inside.sum()), float(wait.sum()), slow)


def why_not_ahead(f: CudaFacts) -> str:
    """Why the CPU did not get far ahead of the GPU (a naive timer saw the work, the last launch came late)."""
    if f.at_cap or f.slow_launches:
        return (f"the launch queue reached {f.max_queue} pending launches, CUDA's cap of about {LAUNCH_QUEUE_CAP}: "
                f"from there {f.slow_launches} launch calls waited for a free slot, so the CPU could run only that far "
                "ahead of the GPU and a timer on the CPU saw the rest of the work. Fewer, larger kernels stay under "
                "the cap")
    if f.kernel_s == f.kernel_s and f.launch_s == f.launch_s and f.kernel_s <= 2 * f.launch_s:
        return (f"each kernel ran {fmt_time(f.kernel_s)} on the GPU against {fmt_time(f.launch_s)} for its launch "
                f"on the CPU: the launch latency, not the GPU, set the pace, so the GPU kept up and the queue never "
                f"grew (longest {f.max_queue}); there was little queued work for the CPU to run ahead of. Larger "
                "matrices (the size slider) make each kernel outlast its launch")
    if f.waits:
        return (f"{f.waits} synchronizing call(s) inside the run (a copy to the host, .item(), a synchronize) made "
                f"the CPU wait {fmt_time(f.wait_s)} for the GPU; look for them on the timeline")
    return (f"{f.sentence()}: the GPU took the work as it came. If another process shares this GPU (nvidia-smi "
            "lists it), its kernels delay ours; a capture shows only this process's work")


def queue_full(n: int, cuda: bool) -> float:
    """How long the queue must grow to count as "filled" by ``n`` issued ops: half of them, at most
    90% of the launch-queue cap on CUDA (it can never hold more than the cap)."""
    return min(n / 2, 0.9 * LAUNCH_QUEUE_CAP) if cuda else n / 2


def why_queue(f: CudaFacts, *, backend_slower: bool) -> str:
    """Why the launch queue did not do what the slower side predicts, in CUDA's terms."""
    if backend_slower:
        return (f"the GPU was the slower side but the queue grew only to {f.max_queue}: {f.sentence()}. A "
                "synchronizing call in the loop, or the GPU shared with another process, empties it; the "
                f"timeline shows which ({f.waits} waits)")
    return (f"the queue reached {f.max_queue} although the CPU's launches ({fmt_time(f.launch_s)}) were the slower "
            f"side: kernels of {fmt_time(f.kernel_s)} waited behind earlier work on the stream, or the GPU was busy "
            "with another process (nvidia-smi)")


def why_streams(r: Any) -> str:
    """Why waiting for ``z``'s event was not much sooner than a device-wide synchronize (barriers on CUDA)."""
    full, narrow = r.barrier_names
    return (f"{narrow} took {fmt_time(r.wait_to_read_wait)} and {full} {fmt_time(r.waitall_wait)}: z's two small "
            "kernels run on their own stream, but the GPU starts another stream's kernel only where streaming "
            f"multiprocessors are free, and each {r.size}x{r.size} product of the chain can occupy all of them, so "
            "z waited behind the chain's running products. More, smaller products in the chain (the slider) leave "
            "gaps for z; nothing on the CPU side sets this")


def why_chain_ended(r: Any) -> str:
    """Why the follow-up kernels did not run beside the chain (barriers on CUDA)."""
    return (f"the GPU had finished the chain's {r.long_ops} products of {r.size}x{r.size} before the first follow-up "
            f"kernel started: the CPU got z after {fmt_time(r.wait_to_read_next)} and launched the follow-up then, and "
            "the chain was already done. Queue more unrelated work (the slider) so the chain outlasts the wait")


def explain(checks: Iterable[Any], why: str) -> list[Any]:
    """The checks with ``why`` as the reason of each that did not hold (✘), and after the spread's word
    for each that cannot tell (the CPU engine's reasons do not apply to a GPU run)."""
    out = []
    for c in checks:
        if c.holds is False:
            c = replace(c, otherwise=why)
        elif c.holds is None:
            c = replace(c, otherwise=f"the runs' spread covers the line this claim draws; {why}")
        out.append(c)
    return out
