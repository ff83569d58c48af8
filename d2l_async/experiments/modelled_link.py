"""DDP's overlap on a *modelled* link: measured backward pass, modelled all-reduce.

On one CPU core (Binder) the gloo ranks take turns on the core, so the real run of notebook 10 can
show *when* each all-reduce ran but never a step that got shorter.  This module shows the schedule a
machine with a network card per rank would give, the way notebook 07 shows modelled devices:

* the **backward pass is measured** here, in this process: the same MLP as the ranks
  (:func:`d2l_async.distributed.ranks` ``_model``), one minibatch, and the instant each layer's
  gradients are ready (``register_post_accumulate_grad_hook``), repeated;
* the **link is modelled**: an all-reduce of ``b`` bytes takes ``latency + b / bandwidth``
  (:class:`LinkModel`, default a 10 Gbit/s link with 20 µs latency: a ring all-reduce between two
  ranks sends each byte once each way);
* **after backward**: one all-reduce of every gradient, started when the backward pass ends;
* **bucketed** (DDP): gradients in reverse layer order are packed into buckets of
  ``bucket_cap_mb``; a bucket is sent when its last gradient is ready, one at a time on the link::

      backward   | L6 | L5 | L4 | L3 | L2 | L1 |
      link            [b1 ]  [b2 ]  [b3 ]  [b4 ]   [b5]  <- modelled; hidden while backward runs

The step is the later of the backward's end and the last bucket's end.  Every repeat gives one
sample of each step time (both schedules of the same pass: a pair), so :func:`checks` decides
"bucketing shortens the step" against the spread of the paired ratios
(:func:`d2l_async.verdict.compare_paired`), and every figure and check says *modelled*.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from .. import claims, config
from .._words import fmt_time
from ..trace import Lane, LaneRole, Trace
from .._args import having, instance, integer, number, samples, sequence
from ._show import Displayed

__all__ = ["LinkModel", "ModelledOverlap", "run_modelled_overlap", "schedule", "checks", "LABEL", "MODELLED_STEP"]

#: Said on every figure and check of this module.
LABEL = "modelled link: measured backward pass, all-reduce time from a link model, not measured"


@dataclass(frozen=True)
class LinkModel:
    """An all-reduce of ``b`` bytes takes ``latency_s + b / bytes_per_s`` (one message at a time)."""

    bytes_per_s: float = 10e9 / 8  # 10 Gbit/s
    latency_s: float = 20e-6

    def __post_init__(self) -> None:
        number("bytes_per_s", self.bytes_per_s, above=0)
        number("latency_s", self.latency_s, minimum=0)
        if not self.bytes_per_s > 0 or not self.latency_s >= 0:
            raise ValueError(f"LinkModel needs bytes_per_s > 0 and latency_s >= 0, got {self}")

    def seconds(self, nbytes: float) -> float:
        return self.latency_s + nbytes / self.bytes_per_s

    @property
    def words(self) -> str:
        return f"{self.bytes_per_s * 8 / 1e9:g} Gbit/s, {self.latency_s * 1e6:g} µs latency"


def schedule(ready_s: list[float], nbytes: list[int], *, bucket_bytes: float, end_s: float,
             link: LinkModel) -> tuple[list[tuple[float, float, float, int]], float, float]:
    """The bucketed and after-backward schedules of one backward pass.

    Args:
        ready_s: when each gradient was ready (seconds from the backward's start), in readiness order.
        nbytes: each gradient's bytes, same order.
        bucket_bytes: DDP's bucket cap.
        end_s: when the backward pass ended.
        link: the link model.

    Returns:
        ``(buckets, step_bucketed, step_after)``: per bucket ``(ready, start, end, bytes)``; the two
        step ends (seconds from the backward's start).
    """
    instance("link", link, LinkModel, what="d2l_async.experiments.modelled_link.LinkModel")
    ready_s = samples("ready_s", ready_s, minimum=0, what="seconds")
    nbytes = [integer("nbytes", b, minimum=0) for b in sequence("nbytes", nbytes, what="byte counts (int)", empty=False)]
    bucket_bytes = number("bucket_bytes", bucket_bytes, above=0)
    end_s = number("end_s", end_s, minimum=0)
    if len(ready_s) != len(nbytes):
        raise ValueError(f"ready_s and nbytes must have one entry per gradient each, got {len(ready_s)} and "
                         f"{len(nbytes)}")
    buckets, size, last_ready = [], 0, 0.0
    for t, b in zip(ready_s, nbytes):
        size, last_ready = size + b, max(last_ready, t)
        if size >= bucket_bytes:
            buckets.append((last_ready, size))
            size = 0
    if size:
        buckets.append((last_ready, size))
    out, free = [], 0.0
    for ready, b in buckets:
        start = max(ready, free)
        free = start + link.seconds(b)
        out.append((ready, start, free, b))
    step_bucketed = max(end_s, free)
    step_after = end_s + link.seconds(sum(nbytes))
    return out, step_bucketed, step_after


@dataclass(frozen=True)
class ModelledOverlap(Displayed):
    """Step times of after-backward vs bucketed on a modelled link, one sample per measured backward.

    Attributes:
        step_after_s, step_bucketed_s: per repeat, backward + communication (seconds; modelled link).
        backward_s: per repeat, the measured backward pass.
        comm_s: the modelled time of all gradients in one message.
        hidden_s: per repeat, link time that ran while backward was still running (bucketed).
        trace: the last repeat's schedule as a trace (a "backward (measured)" lane and a
            "link (modelled)" lane), for ``viz.plot_timeline``.
        link, bucket_cap_mb, model: the settings; ``label``: :data:`LABEL`.
    """

    step_after_s: tuple[float, ...]
    step_bucketed_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    comm_s: float
    hidden_s: tuple[float, ...]
    trace: Trace
    link: LinkModel
    bucket_cap_mb: float
    model: str
    label: str = LABEL

    def checks(self) -> list[Any]:
        """The checks of this run's claim (:func:`checks`)."""
        return checks(self)

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        return (f"{self.model}: backward measured here, all-reduces on a modelled {self.link.words} link",
                [("backward pass, measured (median)", fmt_time(statistics.median(self.backward_s))),
                 ("all gradients on the modelled link", fmt_time(self.comm_s)),
                 ("step after backward / bucketed (modelled)", f"{fmt_time(statistics.median(self.step_after_s))} / "
                                                              f"{fmt_time(statistics.median(self.step_bucketed_s))}")])


def _measure(width: int, depth: int, batch: int, repeats: int) -> tuple[list[tuple[list[float], float]], list[int]]:
    import torch

    from ..distributed.ranks import mlp

    net = mlp(width, depth, torch.device("cpu"))
    params = [p for p in net.parameters() if p.requires_grad]
    nbytes = [p.numel() * p.element_size() for p in params]
    x, y = torch.randn(batch, width), torch.randn(batch, 1)
    stamps: dict[int, float] = {}
    hooks = [p.register_post_accumulate_grad_hook(lambda p, i=i: stamps.__setitem__(i, time.perf_counter()))
             for i, p in enumerate(params)]
    runs = []
    # one intra-op thread, as each rank runs: beside busy ranks a second thread only waits for a core
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for k in range(repeats + 1):  # the first is a warm-up
            net.zero_grad(set_to_none=False)
            loss = torch.nn.functional.mse_loss(net(x), y)
            stamps.clear()
            t0 = time.perf_counter()
            loss.backward()
            end = time.perf_counter() - t0
            if k:
                runs.append(([stamps[i] - t0 for i in range(len(params))], end))
    finally:
        torch.set_num_threads(threads)
        for h in hooks:
            h.remove()
    return runs, nbytes


def run_modelled_overlap(*, width: int | None = None, depth: int | None = None, batch: int | None = None,
                         bucket_cap_mb: float = 1.0, link: LinkModel | None = None,
                         repeats: int | None = None) -> ModelledOverlap:
    """Measure the MLP's backward pass here and schedule its all-reduces on a modelled link.

    Args:
        width, depth, batch: the MLP (defaults as :func:`~d2l_async.experiments.run_overlap`).
        bucket_cap_mb: DDP's bucket size.
        link: the link model (default 10 Gbit/s, 20 µs).
        repeats: measured backward passes (default 7, quick mode 5): one step-time sample each.

    Returns:
        The frozen :class:`ModelledOverlap`: per measured backward pass the after-backward and bucketed step times
        on the modelled link, the backward time and the hidden link time; the one-message link time, the last
        repeat's schedule as a trace, and the settings. The step times add the modelled link to the measured
        backward: they are modelled, not measured.

    Raises:
        ValueError: a size or ``repeats`` below 1, or ``bucket_cap_mb`` outside (0, 1024].
    """
    width = integer("width", width if width is not None else 512, minimum=1)
    depth = integer("depth", depth if depth is not None else config.scale(6, 4), minimum=1)
    batch = integer("batch", batch if batch is not None else config.scale(128, 64), minimum=1)
    repeats = integer("repeats", repeats if repeats is not None else config.scale(7, 5), minimum=1)
    bucket_cap_mb = number("bucket_cap_mb", bucket_cap_mb, above=0, maximum=1024)
    if link is not None:
        instance("link", link, LinkModel, what="d2l_async.experiments.modelled_link.LinkModel or None")
    link = link or LinkModel()
    runs, nbytes = _measure(width, depth, batch, repeats)
    order = None
    after, bucketed, backward, hidden = [], [], [], []
    for ready, end in runs:
        order = sorted(range(len(ready)), key=lambda i: ready[i])
        buckets, t_b, t_a = schedule([ready[i] for i in order], [nbytes[i] for i in order],
                                     bucket_bytes=bucket_cap_mb * 2**20, end_s=end, link=link)
        after.append(t_a)
        bucketed.append(t_b)
        backward.append(end)
        hidden.append(sum(max(0.0, min(e, end) - s) for _, s, e, _ in buckets))
    trace = _trace(runs[-1], buckets, t_a, link)
    return ModelledOverlap(tuple(after), tuple(bucketed), tuple(backward), link.seconds(sum(nbytes)),
                           tuple(hidden), trace, link, float(bucket_cap_mb), f"MLP {width}x{depth}, batch {batch}")


def _trace(run: tuple[list[float], float], buckets: list[tuple[float, float, float, int]], t_after: float,
           link: LinkModel) -> Trace:
    ready, end = run
    rows: list[dict[str, Any]] = [dict(lane="backward (measured)", kind="op", name="backward", start=0.0, end=end,
                                       device="cpu", reason="")]
    for k, (_, s, e, b) in enumerate(buckets):
        rows.append(dict(lane="link, bucketed (modelled)", kind="op", name=f"all-reduce bucket {k + 1} "
                         f"({b / 2**20:.1f} MB)", start=s, end=e, device="link", reason=""))
    rows.append(dict(lane="link, after backward (modelled)", kind="op", name="all-reduce (all gradients)",
                     start=end, end=t_after, device="link", reason=""))
    cols = {key: [r[key] for r in rows] for key in rows[0]}
    cols["id"] = list(range(len(rows)))
    lanes = [Lane("backward (measured)", LaneRole.BACKEND, device="cpu"),
             Lane("link, bucketed (modelled)", LaneRole.BACKEND, device="link"),
             Lane("link, after backward (modelled)", LaneRole.BACKEND, device="link")]
    return Trace.from_columns(cols, lanes, {"device": f"one CPU (backward) + a modelled {link.words} link",
                                            "modelled_label": LABEL, "experiment": "modelled link"})


MODELLED_STEP = claims.claim(
    "10b.modelled-link", notebooks=("10b_ddp_overlap",), role="modelled",
    sentence="modelled link: overlapping communication with backward shortens the step",
    book="§13.5 and DDP's buckets, on a link a model gives (not a measured network)",
    quantity="bucketed / after-backward step on the modelled link, one pair per measured backward pass",
    rule="compare_paired: the interval wholly below 1")


def checks(m: ModelledOverlap) -> list[Any]:
    """The DDP lesson on the modelled link (not displayed): bucketing shortens the step, decided against the
    spread of the measured backward passes.  ``role="modelled"``: shown with the modelled mark (◇), an
    illustration of the schedule a real link would give, never a ✔ of this machine.

    Returns:
        The check of :data:`MODELLED_STEP`.
    """
    having("m", m, ("hidden_s", "comm_s"), what="a ModelledOverlap")
    from d2l_async import lesson
    from d2l_async.verdict import compare_paired

    v = compare_paired(m.step_bucketed_s, m.step_after_s, names=("bucketed", "after backward"))
    hid = statistics.median(m.hidden_s)
    if v.holds is None:
        cause, facts = lesson.Cause.SPREAD, {"runs": f"{v.n_a} measured backward passes"}
    elif hid <= 0:
        cause, facts = lesson.Cause.TOO_SMALL, {"small": "one bucket", "took": f"{m.bucket_cap_mb:g} MB",
                                                "beside": "the gradients: nothing sent during backward"}
    else:
        cause, facts = lesson.Cause.TOO_SMALL, {"small": "the modelled link", "took": fmt_time(m.comm_s),
                                                "beside": "the buckets' latencies"}
    return [MODELLED_STEP.check(v, cause=cause, facts=facts, detail=(
        f"{fmt_time(hid)} of {fmt_time(m.comm_s)} of modelled communication during the measured "
        f"{fmt_time(statistics.median(m.backward_s))} backward pass ({m.link.words}; {m.model})"))]


def _example(after: list[float], bucketed: list[float], hidden: float = 0.002) -> ModelledOverlap:
    trace = _trace(([0.001], 0.01), [(0.001, 0.001, 0.002, 1 << 20)], 0.012, LinkModel())
    n = len(after)
    return ModelledOverlap(tuple(after), tuple(bucketed), (0.01,) * n, 0.002, (hidden,) * n, trace, LinkModel(), 1.0,
                           "MLP example")


def _register() -> None:
    from d2l_async import claims, lesson

    claims.falsifier(MODELLED_STEP, "bucketed steps as long as after-backward ones",
                     lambda: checks(_example([0.012, 0.0121, 0.0119], [0.012, 0.0121, 0.0119]))[0])
    claims.counterfactual(MODELLED_STEP, "bucketed longer: one bucket, nothing sent during backward",
                          lesson.Cause.TOO_SMALL,
                          lambda: checks(_example([0.012, 0.0121, 0.0119], [0.013, 0.0131, 0.0129], hidden=0.0))[0])
    claims.counterfactual(MODELLED_STEP, "steps that scatter across 1", lesson.Cause.SPREAD,
                          lambda: checks(_example([0.012, 0.010, 0.014], [0.011, 0.013, 0.012]))[0])


_register()
