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

from d2l_async import claims, config, lesson
from d2l_async._words import fmt_time
from d2l_async.trace import write_chrome_trace

from ._common import choice, positive_int, resolve_backend
from ._show import Displayed
from .queue_memory import SampleQueueSummary, sample_queue_summary
from d2l_async.trace import Trace
from d2l_async._args import TRACE_HINT, having, instance, sequence
from d2l_async._args import path as as_path

__all__ = ["ProfilingResult", "run_profiling", "sample_summaries", "export_perfetto", "PROFILE_SAMPLES", "checks",
           "sample_checks", "hta_check", "Samples", "NO_CPU_QUEUE", "GPU_QUEUE", "DEEP_QUEUES", "HTA_AGREES"]

#: The shipped GPU traces :func:`sample_summaries` covers.
PROFILE_SAMPLES = ("v100_training_step", "a100_training_step")


@dataclass(frozen=True)
class ProfilingResult(Displayed):
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

    def checks(self) -> list[lesson.Check]:
        """The checks of this run's claims (:func:`checks`)."""
        return checks(self)

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        return (f"Ran on: {self.device}; {self.model}, {self.steps} steps of {self.batch_size}",
                [("events", f"{self.events:,}, {self.backend_events:,} of them on backend lanes"),
                 ("longest launch queue", str(self.max_queue)),
                 ("the frontend waited in synchronizations", fmt_time(self.blocked_seconds))])


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


def sample_summaries(names: tuple[str, ...] = PROFILE_SAMPLES) -> "Samples":
    """:func:`~d2l_async.experiments.queue_memory.sample_queue_summary` for each shipped GPU trace.

    Returns:
        One :class:`SampleQueueSummary` per name, in order (a single name may be given as a string), as
        :class:`Samples`: a tuple that displays its table and checks.
    """
    if isinstance(names, str):
        names = (names,)
    names = sequence("names", names, what="sample names (d2l_async.data.SAMPLES)")
    return Samples(sample_queue_summary(n) for n in names)


def export_perfetto(trace: Any, path: str | Path) -> Path:
    """Write ``trace`` as Chrome Trace JSON (``.json`` or ``.json.gz``) for https://ui.perfetto.dev.

    Returns:
        ``path`` as a :class:`~pathlib.Path`, the file written (its parent folders created).

    Raises:
        ValueError: ``path`` does not end in ``.json`` or ``.json.gz``.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    path = as_path("path", path)
    if not (path.name.endswith(".json") or path.name.endswith(".json.gz")):
        raise ValueError(f"path must end in .json or .json.gz (Perfetto reads Chrome Trace JSON), got {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_chrome_trace(trace, path)
    return path


# ---------------------------------------------------------------- did the lesson hold on this run?
NO_CPU_QUEUE = claims.claim(
    "09.cpu-no-queue", notebooks=("09_profiling",),
    sentence="a CPU profile has no backend queue: PyTorch runs CPU ops before the line returns",
    book="§13.2: PyTorch's CPU ops are synchronous; a GPU's kernels queue behind the frontend",
    quantity="events on backend lanes of the profile", rule="fact: none on a CPU, some with a queue on a GPU",
    says="{back} of {events} events on backend lanes")
GPU_QUEUE = claims.claim(
    "09.gpu-queue", notebooks=("09_profiling",),
    sentence="on the GPU, kernels queue on CUDA streams behind the frontend",
    book="§13.2: the frontend issues, the GPU's streams run the queue", headline=False,
    quantity="events on CUDA streams and the longest launch queue", rule="fact: some events, a queue of 1 or more",
    says="{back} of {events} events on CUDA streams, longest queue {queue}")
DEEP_QUEUES = claims.claim(
    "09.recorded-queues", notebooks=("09_profiling",),
    sentence="real training steps keep hundreds of kernels queued",
    book="§13.2: the frontend races ahead of the GPU", quantity="the longest launch queue of each recorded trace",
    rule="fact: at least 100 in every trace", says="{queues}")
HTA_AGREES = claims.claim(
    "09.hta-agrees", notebooks=("09_profiling",),
    sentence="HTA and d2l_async.analysis agree on the V100 trace's longest queue",
    book="HolisticTraceAnalysis's queue length: +1 at a launch, -1 when the kernel starts",
    quantity="the longest queue by both", rule="fact: equal", says="HTA {theirs}, d2l_async {ours}")


def checks(r: ProfilingResult) -> list[lesson.Check]:
    """What the profile of this run shows, from its numbers only.

    Returns:
        The check of :data:`NO_CPU_QUEUE` (a CPU profile) or :data:`GPU_QUEUE` (a GPU one).
    """
    having("r", r, ("backend", "trace"), what="a ProfilingResult")
    facts = {"back": f"{r.backend_events:,}", "events": f"{r.events:,}", "queue": r.max_queue}
    numbers = {"backend_events": r.backend_events, "events": r.events, "max_queue": r.max_queue}
    if r.backend == "cuda":
        return [GPU_QUEUE.check(r.backend_events > 0 and r.max_queue >= 1, cause=lesson.Cause.TRACE, facts={
            **facts, "seen": "each launch waited for the previous kernel"}, numbers=numbers)]
    return [NO_CPU_QUEUE.check(r.backend_events == 0, cause=lesson.Cause.TRACE, facts={
        **facts, "seen": "work on another device or stream: check r.trace.lanes"}, numbers=numbers)]


def sample_checks(samples: tuple[SampleQueueSummary, ...]) -> list[lesson.Check]:
    """What the shipped GPU traces show, computed from the files.

    Returns:
        The check of :data:`DEEP_QUEUES` over every sample.
    """
    for s in sequence("samples", samples, what="SampleQueueSummary", empty=False):
        having("samples", s, ("name", "max_queue"), what="a sequence of SampleQueueSummary")
    shallow = [s for s in samples if s.max_queue < 100]
    return [DEEP_QUEUES.check(not shallow, cause=lesson.Cause.TRACE, facts={
        "queues": ", ".join(f"{s.name} {s.max_queue}" for s in samples),
        "seen": ", ".join(f"{s.name} peaks at {s.max_queue}" for s in shallow)},
        numbers={f"max_queue {s.name}": s.max_queue for s in samples})]


def hta_check(summary: SampleQueueSummary) -> lesson.Check:
    """HolisticTraceAnalysis's longest queue of ``summary``'s trace against :mod:`d2l_async.analysis`'s.

    Returns:
        The check of :data:`HTA_AGREES`: can't tell (cause ``MISSING``) where HTA is not installed.
    """
    having("summary", summary, ("name", "max_queue"), what="a SampleQueueSummary")
    import importlib.util

    if importlib.util.find_spec("hta") is None:
        return HTA_AGREES.check(None, cause=lesson.Cause.MISSING, shown="HTA not installed", facts={
            "missing": "HolisticTraceAnalysis is not installed: pip install HolisticTraceAnalysis"})
    import logging
    import shutil
    import tempfile
    import warnings

    from hta.trace_analysis import TraceAnalysis

    from d2l_async import data

    logging.getLogger("hta").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="hta_") as rank_dir, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # HTA's own deprecation warnings (pandas), not the reader's to act on
        shutil.copy(data.sample_path(summary.name), rank_dir)  # HTA reads a folder of per-rank traces
        theirs = TraceAnalysis(trace_dir=rank_dir).get_queue_length_summary(ranks=[0])
    hta_max = int(theirs.droplevel(0, axis=1)["max"].max())
    return HTA_AGREES.check(hta_max == summary.max_queue, cause=lesson.Cause.BUG, facts={
        "theirs": hta_max, "ours": summary.max_queue, "bug": "the two queue lengths differ on a shipped trace"})


class Samples(tuple):
    """:func:`sample_summaries`'s summaries; displayed, a table of their queues and :func:`sample_checks`."""

    def __new__(cls, iterable: Any = (), /) -> "Samples":
        return super().__new__(cls, sequence("iterable", iterable, what="sample summaries"))

    def checks(self) -> list[lesson.Check]:
        """The checks of the recorded traces' claim (:func:`sample_checks`)."""
        return sample_checks(self)

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        return ("Recorded on real GPUs (HolisticTraceAnalysis's test data); every number computed now from the file",
                [(f"{s.name} ({s.gpu})", f"longest queue {s.max_queue}, time-weighted mean "
                  f"{s.time_weighted_mean:.0f}, {s.launches:,} launches in {fmt_time(s.duration)}") for s in self])

    _ipython_display_ = Displayed._ipython_display_


def _register() -> None:
    from .queue_memory import sample_queue_summary as load

    claims.falsifier(NO_CPU_QUEUE, "a CUDA profile read as a CPU one", lambda: checks(_as_cpu("v100_training_step"))[0])
    claims.counterfactual(NO_CPU_QUEUE, "a CUDA profile read as a CPU one", lesson.Cause.TRACE,
                          lambda: checks(_as_cpu("v100_training_step"))[0])
    claims.falsifier(GPU_QUEUE, "the recorded CPU-only trace read as a GPU profile",
                     lambda: checks(_as_cuda("cpu_only"))[0])
    claims.counterfactual(GPU_QUEUE, "the recorded CPU-only trace read as a GPU profile", lesson.Cause.TRACE,
                          lambda: checks(_as_cuda("cpu_only"))[0])
    claims.falsifier(DEEP_QUEUES, "the recorded AlexNet step (a shallow queue)",
                     lambda: sample_checks((load("a100_alexnet"),))[0])
    claims.counterfactual(DEEP_QUEUES, "the recorded AlexNet step", lesson.Cause.TRACE,
                          lambda: sample_checks((load("a100_alexnet"),))[0])
    claims.falsifier(HTA_AGREES, "a summary whose longest queue is off by one", lambda: hta_check(_off_by_one()))
    claims.counterfactual(HTA_AGREES, "a summary whose longest queue is off by one", lesson.Cause.BUG,
                          lambda: hta_check(_off_by_one()))


def _profile_of(name: str, backend: str) -> ProfilingResult:
    from d2l_async import data

    trace = data.load_sample(name)
    back = sum(int((trace["lane"] == lane.name).sum()) for lane in trace.backend_lanes)
    return ProfilingResult(trace, name, 1, 1, len(trace), back, 0, 0.0, backend, name, False)


def _as_cpu(name: str) -> ProfilingResult:
    return _profile_of(name, "cpu")


def _as_cuda(name: str) -> ProfilingResult:
    return _profile_of(name, "cuda")


def _off_by_one() -> SampleQueueSummary:
    import dataclasses

    from .queue_memory import sample_queue_summary

    s = sample_queue_summary("v100_training_step")
    return dataclasses.replace(s, max_queue=s.max_queue + 1)


_register()
