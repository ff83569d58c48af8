"""What a CUDA capture says about its run, and the reasons a lesson did not hold on a GPU.

The CPU engine's reasons -- worker threads taking turns on a busy core, Python's interpreter lock --
do not apply to a CUDA run: there the backend is the GPU, which needs no CPU to compute.  What sets a
CUDA run's shape is read from its capture (:func:`cuda_facts`, :func:`z_wait`):

* **the CPU's time per op**: the interval from one launch to the next, less the waits inside it: the
  Python line, the dispatcher and the ``cudaLaunchKernel`` call (itself only a few µs of it).  A kernel
  shorter than that finishes before the next one arrives, so the GPU keeps up and nothing queues;
* **the launch latency**: a kernel starts on an idle GPU some 10-30 µs after its launch call begins
  (25.5 µs median on the shipped ``a100_simple_add`` trace), so "launched before the previous kernel
  ended" does not mean "waited for it" (:func:`~d2l_async.experiments._cost_model.backend_pace`);
* **queue depth**: launches issued but not started (HolisticTraceAnalysis's queue length);
* **the launch-queue cap**: CUDA holds about :data:`LAUNCH_QUEUE_CAP` pending launches per device; past
  that, ``cudaLaunchKernel`` itself waits for a slot, and the CPU can run no further ahead;
* **a synchronizing call**: ``.item()`` and ``float()`` copy the value into *pinned* host memory
  (``Memcpy DtoH (Device -> Pinned)``: the copy call returns at once) and then wait in
  ``cudaStreamSynchronize`` for every kernel before it; ``.cpu()``, ``.numpy()`` and ``print`` copy
  into *pageable* memory, where ``cudaMemcpyAsync`` itself holds the CPU until the copy is done, and
  then synchronize the stream too (``at::cuda::memcpy_and_sync``, ``aten/src/ATen/native/cuda/CUDAScalar.cu``);
* **a busy GPU**: another process's kernels (``nvidia-smi``) delay ours; a capture shows only our own.

The ``why_*`` functions turn these numbers into the sentences a ✘ shows, one sentence per outcome,
each built from the numbers it names.  Pure functions: no torch, no GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable

from ._common import backend_work, launches
from ._why import fmt_time
from .parallel_lessons import busy_seconds, device_intervals

__all__ = ["LAUNCH_QUEUE_CAP", "CudaFacts", "ZWait", "cuda_facts", "z_wait", "why_not_ahead", "why_queue",
           "queue_full", "explain", "why_streams", "why_chain_ended", "cpu_per_launch", "why_timer_saw_work",
           "why_book_loop"]

#: Pending launches CUDA queues per device before ``cudaLaunchKernel`` blocks (measured "about 1024" on
#: recent GPUs; ``make gpu-check`` measures it on the machine it runs on: gpu_numbers.json).
LAUNCH_QUEUE_CAP = 1024
#: A launch call longer than this many times the median call waited for a free queue slot.
SLOW_LAUNCH = 5


@dataclass(frozen=True)
class CudaFacts:
    """What a CUDA capture says about its run.

    Attributes:
        launches: launch calls (kernels, copies and memsets put on a queue).
        launch_s: the CPU's time per op: the median interval between consecutive launch calls on the
            launching thread, less what the CPU spent waiting inside it (a synchronizing call, a launch
            that waited for a queue slot).  Python, the dispatcher and the launch call itself.
        kernel_s: median seconds one piece of device work ran on the GPU.
        max_queue: the longest launch queue of any stream.
        waits: synchronizing calls inside the run: from its first launch to its last (an opening
            synchronize with nothing queued, a final one that ends a timed run, and the capture's own are
            not in the way of anything).
        wait_s: seconds the CPU spent in them.
        slow_launches: launch calls over :data:`SLOW_LAUNCH` times the median: waits for a free queue slot.
        launch_call_s: median seconds of one launch call that did not wait (``cudaLaunchKernel``'s own
            cost, a part of ``launch_s``).
        gpu_busy: the share of the device work's span (first start to last end) the GPU was busy.
    """

    launches: int
    launch_s: float
    kernel_s: float
    max_queue: int
    waits: int
    wait_s: float
    slow_launches: int
    launch_call_s: float = float("nan")
    gpu_busy: float = float("nan")

    @property
    def at_cap(self) -> bool:
        """The queue reached the launch-queue cap (within 10%)."""
        return self.max_queue >= 0.9 * LAUNCH_QUEUE_CAP

    def sentence(self) -> str:
        busy = f", the GPU busy {self.gpu_busy:.0%} of the time" if self.gpu_busy == self.gpu_busy else ""
        return (f"{self.launches} launches, {fmt_time(self.launch_s)} of CPU per launch (the call itself "
                f"{fmt_time(self.launch_call_s)}), device work of {fmt_time(self.kernel_s)} each on the GPU{busy}, "
                f"longest launch queue {self.max_queue}")


def _wait_before(starts: Any, ends: Any) -> Any:
    """``W(t)``: seconds of the (non-overlapping) waits ``[starts, ends)`` before time ``t``."""
    import numpy as np

    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, dtype=float)[order], np.asarray(ends, dtype=float)[order]
    dur = np.clip(e - s, 0, None)
    done = np.concatenate([[0.0], np.cumsum(dur)])

    def w(t: Any) -> Any:
        t = np.asarray(t, dtype=float)
        if not len(s):
            return np.zeros_like(t)
        i = np.searchsorted(s, t, side="right") - 1  # the last wait that began at or before t
        inside = np.where(i >= 0, np.clip(t - s[np.maximum(i, 0)], 0, dur[np.maximum(i, 0)]), 0.0)
        return np.where(i >= 0, done[np.maximum(i, 0)] + inside, 0.0)

    return w


def cpu_per_launch(trace: Any) -> tuple[float, float, int]:
    """``(CPU seconds per op, median launch call seconds, slow launch calls)`` of a CUDA trace.

    The CPU's time per op is the median interval between consecutive launch calls of the thread that
    launched most, less the time inside it that the CPU waited: synchronizing calls, and the part of a
    launch call beyond the median call when it took over :data:`SLOW_LAUNCH` times as long (it waited
    for a queue slot).  What is left is Python, the dispatcher and the launch call: the frontend's cost
    of one op.  NaN with fewer than two launches.
    """
    import numpy as np

    calls = launches(trace)
    plain = trace.where(kind="launch")
    ldur = plain["end"] - plain["start"]
    call_s = float(np.median(ldur)) if len(ldur) else float("nan")
    slow = int((ldur > SLOW_LAUNCH * call_s).sum()) if len(ldur) and call_s > 0 else 0
    if len(calls) < 2:
        return float("nan"), call_s, slow
    lanes, counts = np.unique(calls["lane"].astype(str), return_counts=True)
    lane = str(lanes[int(np.argmax(counts))])
    on = calls["lane"] == lane
    order = np.argsort(calls["start"][on], kind="stable")
    start, end, kind = calls["start"][on][order], calls["end"][on][order], calls["kind"][on][order]
    blocks = trace.where(kind="block", lane=[lane])
    slow_call = (kind == "launch") & ((end - start) > SLOW_LAUNCH * call_s) if call_s > 0 else np.zeros(len(start), bool)
    ws = np.concatenate([blocks["start"], start[slow_call] + call_s])
    we = np.concatenate([blocks["end"], end[slow_call]])
    waited = _wait_before(ws, we)
    per_op = (start[1:] - start[:-1]) - (waited(start[1:]) - waited(start[:-1]))
    return float(np.median(per_op)), call_s, slow


def cuda_facts(trace: Any) -> CudaFacts:
    """:class:`CudaFacts` of a CUDA capture (any trace with launches and backend work)."""
    import numpy as np

    from ..analysis import queue_length_summary

    # every call that put work on a queue counts as a launch, a copy into pageable memory (a wait,
    # filed as a block) included
    calls = launches(trace)
    work = backend_work(trace)
    blocks = trace.where(kind="block")
    # the timed region runs from the first launch to the last: a synchronize before the first (a timed
    # run's opening one, nothing queued) or after the last (its closing one, the capture's) holds up no launch
    first_launch = float(calls["start"].min()) if len(calls) else float("inf")
    last_launch = float(calls["start"].max()) if len(calls) else float("-inf")
    inside = np.array([not str(src).startswith("d2l_async.capture") and first_launch <= float(st) < last_launch
                       for src, st in zip(blocks["source"], blocks["start"])], dtype=bool)
    per_op, call_s, slow = cpu_per_launch(trace)
    kernel_s = float(np.median(work["end"] - work["start"])) if len(work) else float("nan")
    summary = queue_length_summary(trace) if len(work) else None
    q = int(summary["max"].max()) if summary is not None and len(summary) else 0
    wait = blocks["end"][inside] - blocks["start"][inside]
    busy = float("nan")
    if len(work):
        span = float(work["end"].max() - work["start"].min())
        busy = busy_seconds(device_intervals(trace)) / span if span > 0 else 1.0
    return CudaFacts(len(calls), per_op, kernel_s, q, int(inside.sum()), float(wait.sum()), slow, call_s, busy)


def why_not_ahead(f: CudaFacts) -> str:
    """Why the CPU did not get far ahead of the GPU (a naive timer saw the work, the last launch came late)."""
    if f.at_cap or f.slow_launches:
        return (f"the launch queue reached {f.max_queue} pending launches, CUDA's cap of about {LAUNCH_QUEUE_CAP}: "
                f"from there {f.slow_launches} launch calls waited for a free slot, so the CPU could run only that far "
                "ahead of the GPU and a timer on the CPU saw the rest of the work. Fewer, larger kernels stay under "
                "the cap")
    if f.kernel_s == f.kernel_s and f.launch_s == f.launch_s and f.kernel_s <= 2 * f.launch_s:
        return (f"each kernel ran {fmt_time(f.kernel_s)} on the GPU against {fmt_time(f.launch_s)} of CPU per launch "
                f"(the launch call itself {fmt_time(f.launch_call_s)}): the launch latency, not the GPU, set the pace, "
                f"so the GPU kept up and the queue never grew (longest {f.max_queue}); there was little queued work "
                "for the CPU to run ahead of. Larger matrices (the size slider) make each kernel outlast its launch")
    if f.waits:
        return (f"{f.waits} synchronizing call(s) inside the run (a copy to the host, .item(), a synchronize) made "
                f"the CPU wait {fmt_time(f.wait_s)} for the GPU; look for them on the timeline")
    return (f"{f.sentence()}: the kernels outlasted the launches, yet the CPU was not far ahead at the end. If "
            "another process shares this GPU (nvidia-smi lists it), its kernels delay ours; a capture shows only "
            "this process's work")


def why_timer_saw_work(naive_s: float, synced_s: float, *, unclear: bool = False) -> str:
    """Why a naive timer around a CUDA loop saw much of the synchronized time, when no trace of the loop was
    taken (a hand-timed loop): the three things that stop the CPU from running ahead of the GPU."""
    seen = naive_s / synced_s if synced_s > 0 else float("nan")
    head = (f"the naive timer saw {seen:.0%} of the synchronized time ({fmt_time(naive_s)} of {fmt_time(synced_s)}): "
            "on a GPU the loop returns once its kernels are queued, so the naive timer sees the work only where the CPU "
            "could not run ahead")
    causes = ("kernels no longer than their launches (the GPU keeps up with the CPU and nothing queues), a "
              "synchronizing call inside the loop (.item(), .cpu(), print), or a queue at CUDA's cap of about "
              f"{LAUNCH_QUEUE_CAP} launches")
    if unclear:
        return (f"{head}, and the runs' spread covers the half the claim draws: {causes} would each push it up. More "
                "runs, or larger matrices (fewer, longer kernels), decide it")
    return (f"{head}: {causes}. Larger matrices make each kernel outlast its launch; the traced run "
            "(run_asynchrony) shows which it was")


def why_book_loop(sync_s: float, async_s: float, ops: int, *, unclear: bool = False) -> str:
    """Why the book's loop on a GPU (a synchronize after every op, or one at the end) did not show the queued
    loop faster, from its own times per op."""
    per = (f"per op the loop with a synchronize after each took {fmt_time(sync_s / ops)} and the queued loop "
           f"{fmt_time(async_s / ops)}")
    what = ("on a GPU queuing saves each op's round trip (the synchronize's return to the CPU) and lets a launch "
            "overlap the kernel before it")
    if unclear:
        return (f"{per}, within the runs' spread: {what}, a few µs per op that a busy CPU's scatter can cover. More "
                "runs decide it; the next cell traces both loops")
    return (f"{per}: {what}, so a queued loop that is no faster waited inside it anyway (a synchronizing call) or "
            "shared the GPU with another process (nvidia-smi). The next cell traces both loops and reads their "
            "launches and kernels")


def queue_full(n: int, cuda: bool) -> float:
    """How long the queue must grow to count as "filled" by ``n`` issued ops: half of them, at most
    90% of the launch-queue cap on CUDA (it can never hold more than the cap)."""
    return min(n / 2, 0.9 * LAUNCH_QUEUE_CAP) if cuda else n / 2


def why_queue(f: CudaFacts, *, backend_slower: bool) -> str:
    """Why the launch queue did not do what the slower side predicts, in CUDA's terms."""
    if backend_slower:
        if f.waits:
            return (f"the GPU was the slower side but the queue grew only to {f.max_queue}: {f.waits} synchronizing "
                    f"call(s) inside the run held the CPU {fmt_time(f.wait_s)} and emptied it ({f.sentence()}); the "
                    "timeline shows where")
        return (f"the GPU was the slower side but the queue grew only to {f.max_queue}: {f.sentence()}. No "
                "synchronizing call held the CPU, so either the run was too short to build a queue or another "
                "process shared the GPU (nvidia-smi)")
    return (f"the queue reached {f.max_queue} although the CPU's launches ({fmt_time(f.launch_s)} per op) were the "
            f"slower side: the GPU was busy {f.gpu_busy:.0%} of the time with kernels of {fmt_time(f.kernel_s)}; "
            "a launch reaches the GPU only some µs after its call, so the queue counts launches in flight too, "
            "and work queued behind a longer kernel earlier on the stream (or another process's, nvidia-smi) adds "
            "to it")


# -- barriers: did the narrow wait have anything to wait for? -------------------------------------------
@dataclass(frozen=True)
class ZWait:
    """What the ``wait_to_read`` run's trace says about the wait for ``z`` (barriers on CUDA).

    Times are seconds on the trace's clock.

    Attributes:
        chain_ops: device work of the unrelated chain queued before the wait (its lane: the one with the
            most device time before the wait).
        chain_end: when the chain's last piece ended.
        z_ops: device work of ``z`` queued before the wait (on the other lanes).
        z_issue: when ``z``'s first launch began.
        z_start, z_end: when ``z``'s first piece started and its last ended on the GPU.
        wait_start, wait_end: the wait (the first synchronizing call after work was queued).
        latency: the launch latency of a launch that found its stream idle (the chain's first kernel):
            how long a kernel takes from its launch call to its start with nothing in the way.
    """

    chain_ops: int
    chain_end: float
    z_ops: int
    z_issue: float
    z_start: float
    z_end: float
    wait_start: float
    wait_end: float
    latency: float

    @property
    def chain_done_first(self) -> bool:
        """The chain had ended before ``z`` was launched: there was nothing for ``z`` to wait behind."""
        return self.chain_end <= self.z_issue

    @property
    def z_delay(self) -> float:
        """Seconds ``z`` started later than its launch latency allows: what it waited on the GPU."""
        return max(0.0, self.z_start - self.z_issue - self.latency)

    @property
    def z_held_back(self) -> bool:
        """``z`` started later than a launch takes by more than a launch latency (10 µs at least): the GPU
        held its kernels back."""
        return self.z_delay > max(self.latency, 10e-6)

    @property
    def z_beside_chain(self) -> bool:
        """``z`` was done before the chain: it ran beside the chain's products, not after them."""
        return self.z_end < self.chain_end

    @property
    def waited(self) -> float:
        return self.wait_end - self.wait_start


def z_wait(trace: Any) -> ZWait | None:
    """:class:`ZWait` of a barriers run's trace; None when it has no wait after queued work, or no work
    on a second lane before it (nothing to tell the chain from ``z``)."""
    import numpy as np

    work = backend_work(trace)
    blocks = trace.where(kind="block")
    if not len(work) or not len(blocks):
        return None
    issued = np.where(np.isfinite(work["issue"]), work["issue"], work["start"])
    after = blocks["start"] >= float(issued.min())
    if not after.any():
        return None
    first = int(np.argmin(np.where(after, blocks["start"], np.inf)))
    w0, w1 = float(blocks["start"][first]), float(blocks["end"][first])
    before = issued < w0
    lanes = np.unique(work["lane"][before].astype(str))
    if len(lanes) < 2:
        return None
    busy = {ln: float(np.sum((work["end"] - work["start"])[before & (work["lane"] == ln)])) for ln in lanes}
    chain_lane = max(busy, key=busy.get)
    chain = before & (work["lane"] == chain_lane)
    z = before & (work["lane"] != chain_lane)
    first_chain = int(np.argmin(np.where(chain, work["start"], np.inf)))
    latency = float(work["start"][first_chain] - issued[first_chain])
    return ZWait(int(chain.sum()), float(work["end"][chain].max()), int(z.sum()), float(issued[z].min()),
                 float(work["start"][z].min()), float(work["end"][z].max()), w0, w1, max(latency, 0.0))


def why_streams(r: Any) -> str:
    """Why waiting for ``z``'s event was not much sooner than a device-wide synchronize (barriers on CUDA),
    read from the ``wait_to_read`` run's trace."""
    full, narrow = r.barrier_names
    times = f"{narrow} took {fmt_time(r.wait_to_read_wait)} and {full} {fmt_time(r.waitall_wait)}"
    w = z_wait(r.trace_wait_to_read)
    if w is None:
        return (f"{times}; the traced run shows no wait after queued work on two streams, so it cannot say what z "
                "waited for. Rerun")
    if w.chain_done_first:
        return (f"{times}: the GPU had finished the chain's {w.chain_ops} products {fmt_time(w.z_issue - w.chain_end)} "
                "before z was even launched (the traced run), so both waits had only z's own kernels to wait for and "
                "there was nothing for the narrow wait to skip. A longer chain (more or larger products, the slider) "
                "keeps the GPU busy past z")
    if w.z_beside_chain and not w.z_held_back:
        return (f"{times}: in the traced run z's kernels started {fmt_time(w.z_start - w.z_issue)} after their launch, "
                f"beside the chain, and were done {fmt_time(w.chain_end - w.z_end)} before the chain's last product; "
                f"the narrow wait there took {fmt_time(w.waited)}. The timed runs did not repeat that: rerun, or raise "
                "repeat")
    return (f"{times}: in the traced run z's kernels started {fmt_time(w.z_start - w.z_issue)} after their launch, "
            f"{fmt_time(w.z_delay)} later than a launch onto an idle stream takes ({fmt_time(w.latency)}), while the "
            f"chain's {w.chain_ops} products ran: z's kernels run on their own stream, but the GPU starts another "
            f"stream's kernel only where streaming multiprocessors are free, and each {r.size}x{r.size} product of the "
            "chain can occupy all of them, so z waited behind the chain's running products. More, smaller products "
            "in the chain (the slider) leave gaps for z")


def why_chain_ended(r: Any) -> str:
    """Why the follow-up kernels did not run beside the chain (barriers on CUDA)."""
    w = z_wait(r.trace_wait_to_read)
    ended = (f" ({fmt_time(w.wait_end - w.chain_end)} before the wait for z returned in the traced run)"
             if w is not None and w.chain_end <= w.wait_end else "")
    return (f"the GPU had finished the chain's {r.long_ops} products of {r.size}x{r.size} before the first follow-up "
            f"kernel started{ended}: the CPU got z after {fmt_time(r.wait_to_read_next)} and launched the follow-up "
            "then, and the chain was already done. Queue more unrelated work (the slider) so the chain outlasts the "
            "wait")


def explain(checks: Iterable[Any], why: str) -> list[Any]:
    """The checks with ``why`` as the reason of each that did not hold (✘, cause ``gpu``), and after the
    spread's word for each that cannot tell (the CPU engine's reasons do not apply to a GPU run)."""
    out = []
    for c in checks:
        if c.holds is False:
            c = replace(c, otherwise=why, cause="gpu")
        elif c.holds is None:
            c = replace(c, otherwise=f"the runs' spread covers the line this claim draws; {why}",
                        cause="spread" if c.cause == "spread" else "gpu")
        out.append(c)
    return out


# -- notebook 05 (sync vs async) on a GPU: each reason from the numbers it names -------------------------------
def _terms(m: Any) -> str:
    return (f"t1 (the CPU's launch) {fmt_time(m.t1)}, t2 (the GPU's time per kernel) {fmt_time(m.t2)}, t3 (a "
            f"synchronize's round trip) {fmt_time(m.t3)}")


def why_async_not_faster(m: Any, f: CudaFacts, *, unclear: bool = False) -> str:
    """Why asynchronous issue was not faster on a GPU: what it could save per op, from ``m``'s costs."""
    save, whole = m.t3 + min(m.t1, m.t2), m.t1 + m.t2 + m.t3
    share = save / whole if whole > 0 else 0.0
    head = (f"on the GPU, per op {_terms(m)}: asynchrony can save at most t3 + min(t1, t2) = {fmt_time(save)} of "
            f"{fmt_time(whole)} ({share:.0%})")
    if unclear:
        return f"{head}, within what the runs scatter: more ops per run (ops=) or more repeats (repeat=) decide it"
    waited = (f"; the asynchronous run itself waited {f.waits} time(s) ({fmt_time(f.wait_s)}) inside its loop"
              if f.waits else "")
    if m.t2 < m.t1:
        return (f"{head}{waited}. Each kernel is shorter than its launch, so the GPU waits for the CPU in both runs; "
                "larger tensors (numel) make the GPU the slower side")
    return f"{head}{waited}. The saving is real but small beside the run-to-run scatter: rerun, or raise repeat"


def why_model_missed(m: Any, measured: float, f: CudaFacts) -> str:
    """Why a GPU run beat the pipeline model's best case ``n·max(t1, t2) + min(t1, t2) + t3``."""
    return (f"the model over-predicts ({fmt_time(m.async_pipeline)} against {fmt_time(measured)}; {_terms(m)} "
            f"({m.t2_source})): its costs come from the traced run, where the profiler adds its own work to every "
            "launch, while the timed runs ran without it. More ops per run (trace_ops) steady the estimate")


def above_bound(m: Any, measured: float, f: CudaFacts) -> str:
    """Where a GPU run's time sits above the pipeline model's best case, and what the capture says held it."""
    model = m.async_pipeline
    head = f"{fmt_time(measured - model)} above the model ({_terms(m)}, {m.t2_source})"
    if f.at_cap or f.slow_launches:
        return (f"{head}: the launch queue reached {f.max_queue}, CUDA's cap is about {LAUNCH_QUEUE_CAP}, and "
                f"{f.slow_launches} launch calls waited there for a kernel to start, so the CPU's loop ran at the "
                "GPU's pace from then on")
    if f.waits:
        return (f"{head}: {f.waits} synchronizing call(s) inside the asynchronous loop held the CPU "
                f"{fmt_time(f.wait_s)}, a round trip each that the model does not count")
    return f"{head}; the traced run shows no wait and no full queue ({f.sentence()})"


def why_ratio_rose(last: Any, *, unclear: bool = False) -> str:
    """Why the sync/async ratio did not fall with the size on a GPU (``last``: the largest size's point)."""
    m = last.model
    head = (f"at {last.numel:,} elements t2 (the GPU's time per kernel) was {fmt_time(m.t2)} against t1 + t3 "
            f"{fmt_time(m.t1 + m.t3)} (the CPU's launch and the synchronize's round trip)")
    if unclear:
        return (f"{head}. Microsecond GPU timings scatter with the CPU's launch times: more repeats, or larger sizes, "
                "decide it")
    if m.t2 < m.t1 + m.t3:
        return (f"the ratio rose with the size: {head}, so the kernel is still shorter than the launch and the round "
                "trip, which do not grow with the tensor. Sweep larger sizes (10**7 and 10**8 elements)")
    return (f"the ratio rose with the size although {head}: the kernel dominates at the largest size, so the smaller "
            "sizes' timings moved the trend. Rerun with more repeats")


def why_t2_share(pts: Any, shares: list[float], *, unclear: bool = False) -> str:
    """Why t2 did not take most of an op's synchronous cost on a GPU, from each size's share."""
    last, m = pts[-1], pts[-1].model
    head = (f"at {last.numel:,} elements t2 (the GPU's time per kernel) was {fmt_time(m.t2)}, {shares[-1]:.0%} of an "
            f"op's synchronous cost, against t1 + t3 {fmt_time(m.t1 + m.t3)} for the CPU's launch and the "
            "synchronize's round trip")
    if unclear:
        return f"{head}. More repeats, or larger sizes (10**7 elements), decide it"
    if shares[-1] < 0.5:
        return (f"{head}: the launch and the round trip do not grow with the tensor, so t2 takes over only at larger "
                "sizes: sweep 10**7 and 10**8 elements")
    return (f"t2's share did not grow with the size ({shares[0]:.0%} at {pts[0].numel:,} elements, {shares[-1]:.0%} "
            f"at {last.numel:,}): {head}. Rerun with more repeats")


def why_sides_unclear(costs: Any) -> str:
    """Why neither side is clearly the slower one on a GPU."""
    return (f"the CPU's launches ({fmt_time(costs.frontend_s)} per op) and the GPU's kernels "
            f"({fmt_time(costs.backend_s)} per op) are within the factor 2 one traced run can decide: either may "
            "lead. Larger tensors (numel) make the GPU the slower side")
