"""Profiling your own code: torch.profiler → our trace → timeline, queue length, Perfetto (D2L §13.2).

:func:`run_profiling` records a few training steps of a small model with ``torch.profiler``
(through :func:`d2l_async.capture.capture`): on a GPU you see kernels on CUDA streams, their launch
queue and the frontend's blocks; on a CPU you see only frontend ops (PyTorch runs CPU ops
synchronously: there is no queue to see — which is why the CPU engine exists).
:func:`sample_summaries` summarizes the real A100/V100 traces shipped with the package, and
:func:`export_perfetto` writes any trace for https://ui.perfetto.dev.  For whole-program views use the
vendors' tools: ``nsys profile python train.py`` (Nsight Systems) and HolisticTraceAnalysis on
torch.profiler traces of many ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from d2l_async import config, lesson
from d2l_async.trace import write_chrome_trace

from ._common import choice, positive_int, resolve_backend
from .queue_memory import SampleQueueSummary, sample_queue_summary
from d2l_async.trace import Trace
from d2l_async._args import TRACE_HINT, having, instance, sequence

__all__ = ["ProfilingResult", "run_profiling", "sample_summaries", "export_perfetto", "PROFILE_SAMPLES", "checks",
           "sample_checks"]

#: The shipped GPU traces :func:`sample_summaries` covers.
PROFILE_SAMPLES = ("v100_training_step", "a100_training_step")


@dataclass(frozen=True)
class ProfilingResult:
    """A torch.profiler capture of a small model's training steps.

    Attributes:
        trace: the captured trace.
        model: a one-line description of the model.
        steps: training steps recorded.
        batch_size: rows per step.
        events: events in the trace.
        backend_events: events on backend lanes (0 on CPU: PyTorch's CPU ops are synchronous).
        max_queue: the longest launch queue (0 without backend lanes).
        blocked_seconds: frontend seconds in synchronizations.
        backend, device, virtual: where it ran (never virtual: this is real PyTorch).
    """

    trace: Any
    model: str
    steps: int
    batch_size: int
    events: int
    backend_events: int
    max_queue: int
    blocked_seconds: float
    backend: str
    device: str
    virtual: bool


def run_profiling(
    *, steps: int | None = None, batch_size: int | None = None, hidden: int = 256, backend: str = "auto"
) -> ProfilingResult:
    """Profile ``steps`` SGD steps of a 3-layer MLP with torch.profiler.

    Args:
        steps: training steps; default 10 (quick mode 3).
        batch_size: rows per step; default 256 (quick mode 64).
        hidden: hidden width.
        backend: ``"auto"``, ``"cuda"`` or ``"cpu"`` (PyTorch on the CPU, profiled directly; the
            engine is not involved).

    Returns:
        The frozen :class:`ProfilingResult`: the capture's trace, the model's description, ``steps``,
        ``batch_size``, the event and backend-event counts, the longest launch queue, the seconds blocked, the
        backend (``"cuda"`` or ``"cpu"``), the device label and ``virtual=False``.

    Raises:
        ValueError: bad sizes or an unavailable backend.
    """
    steps = positive_int("steps", steps if steps is not None else config.scale(10, 3), maximum=10_000)
    batch_size = positive_int("batch_size", batch_size if batch_size is not None else config.scale(256, 64),
                              maximum=1 << 16)
    hidden = positive_int("hidden", hidden, maximum=1 << 14)
    choice("backend", backend, ("auto", "cpu", "cuda"))
    setup = resolve_backend("engine" if backend == "cpu" else backend)
    import torch

    from d2l_async.analysis import blocked_time, queue_length_summary
    from d2l_async.capture import capture
    from d2l_async.devices import describe_machine

    on_cuda = setup.backend == "cuda"
    dev = torch.device("cuda:0" if on_cuda else "cpu")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                              torch.nn.ReLU(), torch.nn.Linear(hidden, 1)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(batch_size, 64, device=dev)
    y = torch.randn(batch_size, 1, device=dev)

    def train() -> float:
        loss = None
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), y)
            loss.backward()
            opt.step()
        return loss.item()  # one blocker at the end, like a logged epoch loss

    train()  # warm-up (allocator, kernels)
    trace = capture(train, device="cuda" if on_cuda else "cpu")
    device = setup.device if on_cuda else f"PyTorch on the CPU ({describe_machine()}), not the engine"
    trace = trace.with_meta(device=device, virtual=False, experiment="profiling")
    summary = queue_length_summary(trace)
    back = sum(int((trace["lane"] == l.name).sum()) for l in trace.backend_lanes)
    return ProfilingResult(trace, f"MLP 64-{hidden}-{hidden}-1, SGD", steps, batch_size, len(trace), back,
                           int(summary["max"].max()) if len(summary) else 0,
                           float(blocked_time(trace)["total"].sum()), "cuda" if on_cuda else "cpu", device, False)


def sample_summaries(names: tuple[str, ...] = PROFILE_SAMPLES) -> tuple[SampleQueueSummary, ...]:
    """:func:`~d2l_async.experiments.queue_memory.sample_queue_summary` for each shipped GPU trace.

    Returns:
        One :class:`SampleQueueSummary` per name, in order (a single name may be given as a string).
    """
    if isinstance(names, str):
        names = (names,)
    return tuple(sample_queue_summary(n) for n in names)


def export_perfetto(trace: Any, path: str | Path) -> Path:
    """Write ``trace`` as Chrome Trace JSON (``.json`` or ``.json.gz``) for https://ui.perfetto.dev.

    Returns:
        ``path`` as a :class:`~pathlib.Path`, the file written (its parent folders created).

    Raises:
        ValueError: ``path`` does not end in ``.json`` or ``.json.gz``.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    path = Path(path)
    if not (path.name.endswith(".json") or path.name.endswith(".json.gz")):
        raise ValueError(f"path must end in .json or .json.gz (Perfetto reads Chrome Trace JSON), got {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_chrome_trace(trace, path)
    return path


# ---------------------------------------------------------------- did the lesson hold on this run?
def checks(r: ProfilingResult) -> list[lesson.Check]:
    """What the profile of this run shows, from its numbers only."""
    having("r", r, ("backend", "trace"), what="a ProfilingResult")
    if r.backend == "cuda":
        return [lesson.check(
            "on the GPU, kernels run on CUDA streams behind the frontend (a launch queue)",
            r.backend_events > 0 and r.max_queue >= 1,
            shown=f"{r.backend_events:,} of {r.events:,} events on CUDA streams; longest launch queue {r.max_queue}",
            otherwise=(f"the profile holds {r.backend_events:,} kernel events and a queue of at most {r.max_queue}: "
                       "each launch waited for the previous kernel (tiny kernels, or a synchronization in the "
                       "step). Raise batch_size or steps."))]
    return [lesson.check(
        "a CPU profile has no backend queue: PyTorch runs CPU ops before the Python line returns",
        r.backend_events == 0,
        shown=f"{r.events:,} events, {r.backend_events:,} of them on backend lanes",
        otherwise=(f"{r.backend_events:,} events landed on backend lanes: something in the step ran on another "
                   "device or stream. Check the trace's lanes (r.trace.lanes)."))]


def sample_checks(samples: tuple[SampleQueueSummary, ...], *, cap: int = 1024) -> list[lesson.Check]:
    """What the shipped GPU traces show, computed from the files."""
    out = []
    for s in sequence("samples", samples, what="SampleQueueSummary"):
        having("samples", s, ("name", "max_queue"), what="a sequence of SampleQueueSummary")
        out.append(lesson.check(
            f"{s.name}: the GPU keeps hundreds of kernels queued",
            s.max_queue >= 100,
            shown=f"longest launch queue on {s.lane}: {s.max_queue} (time-weighted mean {s.time_weighted_mean:.0f})",
            otherwise=f"this trace's queue peaks at {s.max_queue}: its kernels are long enough that the CPU "
                      "never got far ahead (see exercise 5)."))
        if s.name.startswith("v100"):
            out.append(lesson.check(
                f"{s.name}: the queue runs into the CUDA launch-queue cap (about {cap})",
                s.max_queue >= 0.97 * cap,
                shown=f"longest queue {s.max_queue}, at its maximum {s.fraction_at_max:.0%} of the time",
                otherwise=f"the longest queue is {s.max_queue}, below the cap of about {cap}."))
    return out
