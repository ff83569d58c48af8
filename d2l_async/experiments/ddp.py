"""Experiments 2 and 3: overlapping gradient all-reduce with the backward pass; a straggler rank.

Data-parallel training all-reduces every gradient on every step.  The book's two-layer MLP (§13.5)
does it after the whole backward pass; the backward pass, though, produces the last layer's
gradients first, so their all-reduce could start while earlier layers are still being
differentiated.  ``DistributedDataParallel`` does exactly that: gradients are grouped into
*buckets* of ``bucket_cap_mb``; when a bucket's last gradient is ready its all-reduce is launched
asynchronously and the backward pass goes on::

    after_backward   bwd L4 | bwd L3 | bwd L2 | bwd L1 | all-reduce (all gradients, one message) | step
    bucketed         bwd L4 | bwd L3 | bwd L2 | bwd L1 |        ar   | step
                              [ ar L4 ][ ar L3 ][ ar L2 ]   <- on gloo's thread, during backward

The after-backward variant sends all gradients flattened into one tensor: the fewest messages
possible, so that when the bucketed step is faster it owes it to overlap, not to sending fewer,
larger messages.

* :func:`run_overlap` trains the same MLP both ways in the same processes (steps interleaved) and
  reads from the traces how many all-reduces overlapped the backward pass on each rank, and how
  much communication was hidden or exposed.
* :func:`run_straggler` makes one rank sleep before each step: every other rank then waits for it in
  the all-reduce, so every step takes as long as the slowest rank's — the barrier cost of synchronous
  data parallelism.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import config, lesson
from ..verdict import compare, overruled, within
from .._words import fmt_change, fmt_time
from ..trace import Trace
from ..analysis import RankComm, comm_overlap, comm_per_step
from ..distributed import OnRanks, Where, check_backend, run_and_load, where
from ..distributed.ranks import STEP_LABEL, training_rank
from .collective import _int
from .._args import having

__all__ = ["TrainingResult", "run_overlap", "run_straggler", "overlap_checks", "straggler_checks", "machine_check",
           "STRAGGLER_PROFILED_STEPS", "ABOUT"]

#: Profiled steps per setting of :func:`run_straggler` (one sample each for the waiting check).
STRAGGLER_PROFILED_STEPS = 3
#: "About its delay": within this relative tolerance of the straggler's delay.
ABOUT = 0.5


@dataclass(frozen=True)
class TrainingResult(OnRanks):
    """Data-parallel training steps of one MLP under several settings, same processes.

    Attributes:
        ranks: processes.
        labels: the settings, in order (``"after_backward"``, ``"bucketed"``; ``"even"``, ``"straggler"``).
        modes: label -> ``"after_backward"`` or ``"bucketed"``.
        step_s: label -> per timed step, the slowest rank's seconds (a synchronous job waits for it).
        traces: label -> one profiled step of every rank, merged (one lane group per rank).
        comm: label -> per rank :class:`~d2l_async.analysis.RankComm` read from that trace.
        same_params: label -> every rank ended with the same parameters (checksums agree).
        bucket_cap_mb: DDP's bucket size for the bucketed settings.
        delay_s: label -> the slow rank's sleep before each step (0: none).
        slow_rank: the rank that sleeps.
        model: a one-line description (``"MLP 512x4, batch 64"``).
        params_mb: megabytes of gradients all-reduced per step.
        where: the machine; seconds: wall time, process start-up included.
        comm_steps: label -> rank -> one :class:`~d2l_async.analysis.RankComm` per profiled step
            (the step's ``record_function`` window): one sample per step for claims about a step's time.
    """

    ranks: int
    labels: tuple[str, ...]
    modes: dict[str, str]
    step_s: dict[str, tuple[float, ...]]
    traces: dict[str, Trace]
    comm: dict[str, tuple[RankComm, ...]]
    same_params: dict[str, bool]
    bucket_cap_mb: float
    delay_s: dict[str, float]
    slow_rank: int
    model: str
    params_mb: float
    where: Where
    seconds: float
    comm_steps: dict[str, dict[int, tuple[RankComm, ...]]] = field(default_factory=dict)

    def median_step(self, label: str) -> float:
        """Median over timed steps of the slowest rank's step time."""
        return float(statistics.median(self.step_s[label]))

    def extra_wait_s(self, label: str = "straggler", base: str = "even") -> dict[int, tuple[float, ...]]:
        """Per rank other than :attr:`slow_rank`, per profiled step of ``label``: how much longer it waited
        in communication with no gradient compute beside it (exposed) than in its own ``base`` steps
        (their median) -- the time the straggler cost it, read from the traces step by step."""
        out: dict[int, tuple[float, ...]] = {}
        for rank, steps in self.comm_steps.get(label, {}).items():
            ref = [c.exposed_s for c in self.comm_steps.get(base, {}).get(rank, ())]
            if rank == self.slow_rank or not ref or not steps:
                continue
            out[rank] = tuple(c.exposed_s - statistics.median(ref) for c in steps)
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One row per (setting, rank): communication, hidden and exposed seconds; for figures."""
        return [{"setting": label, "rank": c.rank, "collectives": c.collectives, "overlapping": c.overlapping,
                 "comm_s": c.comm_s, "hidden_s": c.hidden_s, "exposed_s": c.exposed_s,
                 "step_s": self.median_step(label)} for label in self.labels for c in self.comm[label]]


def _workload(width: int | None, depth: int | None, batch: int | None, steps: int | None) -> dict[str, int]:
    return {"width": _int("width", width if width is not None else config.scale(512, 512), 8, 4096),
            "depth": _int("depth", depth if depth is not None else config.scale(6, 4), 1, 32),
            "batch": _int("batch", batch if batch is not None else config.scale(128, 64), 1, 8192),
            "steps": _int("steps", steps if steps is not None else config.scale(8, 2), 1, 1000)}


def _bucket(bucket_cap_mb: Any) -> float:
    if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) or not 0 < bucket_cap_mb <= 1024:
        raise ValueError(f"bucket_cap_mb must be a number in (0, 1024], got {bucket_cap_mb!r}")
    return float(bucket_cap_mb)


def _delay(delay_ms: Any) -> float:
    if isinstance(delay_ms, bool) or not isinstance(delay_ms, (int, float)) or not 0 <= delay_ms <= 10_000:
        raise ValueError(f"delay_ms must be a number of milliseconds in [0, 10000], got {delay_ms!r}")
    return float(delay_ms) / 1e3


def _train(settings: list[dict[str, Any]], ranks: int, work: dict[str, int], backend: str, timeout: float,
           trace_dir: Any, profile_steps: int = 1) -> TrainingResult:
    ranks = _int("ranks", ranks, 1, 8)
    backend = check_backend(backend, ranks)
    at = where(backend, ranks)
    labels = tuple(s["label"] for s in settings)
    options = {**work, "settings": settings, "warmup": 1, "profile_steps": profile_steps}
    res, traces = run_and_load(training_rank, ranks, backend=backend, labels=labels, timeout=timeout,
                               options=options, trace_dir=trace_dir)
    step_s, same = {}, {}
    for label in labels:
        per_rank = np.array([v[label]["step_s"] for v in res.values])  # ranks x steps
        step_s[label] = tuple(float(x) for x in per_rank.max(axis=0))
        sums = [v[label]["checksum"] for v in res.values]
        same[label] = bool(np.allclose(sums, sums[0], rtol=1e-5, atol=1e-6))
    traces = {label: t.with_meta(device=at.device, experiment=f"distributed {label}") for label, t in traces.items()}
    w, d, b = work["width"], work["depth"], work["batch"]
    params = d * (w * w + w) + w + 1
    return TrainingResult(ranks, labels, {s["label"]: s["mode"] for s in settings}, step_s, traces,
                          {label: comm_overlap(t) for label, t in traces.items()}, same,
                          float(settings[-1].get("bucket_cap_mb", 25.0)),
                          {s["label"]: float(s.get("delay_s", 0.0)) for s in settings},
                          int(settings[-1].get("slow_rank", ranks - 1)), f"MLP {w}x{d}, batch {b} per rank",
                          params * 4 / 2**20, at, res.seconds,
                          {label: comm_per_step(t, STEP_LABEL) for label, t in traces.items()})


def run_overlap(*, ranks: int = 2, bucket_cap_mb: float = 1.0, delay_ms: float = 0.0, width: int | None = None,
                depth: int | None = None, batch: int | None = None, steps: int | None = None, backend: str = "auto",
                timeout: float = 180.0, trace_dir: Any = None) -> TrainingResult:
    """The same MLP step with the all-reduce after backward vs bucketed during it (DDP).

    Args:
        ranks: processes (1-8).
        bucket_cap_mb: DDP's bucket size in MB (one 512x512 layer is 1 MB of gradients).
        delay_ms: the last rank sleeps this long before each step (a straggler; 0: none).
        width, depth, batch: the MLP (default 512 x 6, batch 128; quick mode 512 x 4, batch 64).
        steps: timed steps per setting (default 8, quick 2), interleaved across settings.
        backend: ``"auto"``, ``"gloo"`` or ``"nccl"``.
        timeout: seconds before every rank is ended.
        trace_dir: keep the per-rank trace files here (``<trace_dir>/<setting>/rank<r>.json``).

    Returns:
        The frozen :class:`TrainingResult` of the settings ``"after_backward"`` and ``"bucketed"``: per setting the
        slowest rank's seconds of each timed step, one merged profiled step, each rank's :class:`RankComm` (whole
        window and per step) and whether the ranks' parameters agree; the model, the gradient megabytes, the
        :class:`~d2l_async.distributed.Where` and the wall time.
    """
    cap, delay = _bucket(bucket_cap_mb), _delay(delay_ms)
    settings = [{"label": "after_backward", "mode": "after_backward", "delay_s": delay},
                {"label": "bucketed", "mode": "bucketed", "bucket_cap_mb": cap, "delay_s": delay}]
    return _train(settings, ranks, _workload(width, depth, batch, steps), backend, timeout, trace_dir)


def run_straggler(*, ranks: int = 2, delay_ms: float | None = None, bucket_cap_mb: float = 1.0,
                  width: int | None = None, depth: int | None = None, batch: int | None = None,
                  steps: int | None = None, backend: str = "auto", timeout: float = 180.0,
                  trace_dir: Any = None) -> TrainingResult:
    """Bucketed training with all ranks even, then with the last rank sleeping ``delay_ms`` per step.

    Args:
        delay_ms: the straggler's extra time per step; default 100 ms (quick mode 50 ms: it is sleep,
            so it costs time but no CPU).
        Others as in :func:`run_overlap`.

    Returns:
        The frozen :class:`TrainingResult` of the settings ``"even"`` and ``"straggler"`` (both bucketed), as for
        :func:`run_overlap`, with several profiled steps each (one :class:`RankComm` sample per step in
        ``comm_steps``).

    Raises:
        ValueError: a ``delay_ms`` of 0 (two even runs), or an argument :func:`run_overlap` rejects.
    """
    cap = _bucket(bucket_cap_mb)
    delay = _delay(delay_ms if delay_ms is not None else config.scale(100, 50))
    if delay <= 0:
        raise ValueError("delay_ms must be > 0 for a straggler (0 would be two even runs)")
    settings = [{"label": "even", "mode": "bucketed", "bucket_cap_mb": cap, "delay_s": 0.0},
                {"label": "straggler", "mode": "bucketed", "bucket_cap_mb": cap, "delay_s": delay}]
    # three profiled steps each: the waiting the straggler causes is then decided from one sample per step
    return _train(settings, ranks, _workload(width, depth, batch, steps), backend, timeout, trace_dir,
                  profile_steps=STRAGGLER_PROFILED_STEPS)


# ---------------------------------------------------------------------------------------------
# lesson checks: pure functions of a result
# ---------------------------------------------------------------------------------------------
def _per_rank(comm: tuple[RankComm, ...], attr: str) -> str:
    return ", ".join(f"rank {c.rank}: {getattr(c, attr)}" for c in comm)


def _why_no_overlap(r: TrainingResult, bucketed: tuple[RankComm, ...], after: tuple[RankComm, ...]) -> str:
    """Why a rank's bucketed all-reduces overlapped no backward op, from its counts: one bucket a step
    (no more all-reduces than the after-backward run, which makes one a step), or several whose gloo
    work all ran after the backward ops (the gloo thread waited for a core)."""
    per_step = {c.rank: c.collectives for c in after}  # one all-reduce a step after backward
    none = [c for c in bucketed if c.overlapping < 1]
    several = [c for c in none if c.collectives > per_step.get(c.rank, c.collectives)]
    if not several:
        return (f"with {r.params_mb:.1f} MB of gradients and buckets of {r.bucket_cap_mb:g} MB there was only "
                "one bucket, launched when the backward pass ended: lower bucket_cap_mb")
    ranks = "; ".join(f"rank {c.rank}: {c.collectives} all-reduces for {per_step.get(c.rank, 0)} steps, none while "
                      f"its {c.backward_s * 1e3:.1f} ms of backward ops ran" for c in several)
    return (f"{ranks}: its gloo thread did that work only after the backward ops ended. "
            + (f"With {r.where.cpu_sentence(r.ranks)}, a rank's threads take turns on the cores; rerun"
               if r.where.backend == "gloo" else "Rerun"))


def overlap_checks(r: TrainingResult) -> list[Any]:
    """Lesson checks of :func:`run_overlap` (not displayed)."""
    having("r", r, ("comm", "ranks"), what="a TrainingResult")
    bucketed, after = r.comm["bucketed"], r.comm["after_backward"]
    out = [
        lesson.check(
            "bucketed (DDP): on every rank an all-reduce overlaps the backward pass",
            all(c.overlapping >= 1 for c in bucketed),
            shown=f"all-reduces overlapping backward ops — {_per_rank(bucketed, 'overlapping')} "
                  f"(of {', '.join(str(c.collectives) for c in bucketed)})",
            otherwise=_why_no_overlap(r, bucketed, after)),
        lesson.check(
            "after the backward pass: no all-reduce overlaps it",
            all(c.overlapping == 0 for c in after),
            shown=f"overlapping — {_per_rank(after, 'overlapping')} (of {', '.join(str(c.collectives) for c in after)})",
            otherwise="an all-reduce overlapped a backward op although it was issued after backward() returned: "
                      "a bug in the trace reading, please report it"),
        lesson.check(
            "both ways, every rank ends the step with the same parameters",
            all(r.same_params.values()), shown=", ".join(f"{k}: {'same' if v else 'different'}"
                                                         for k, v in r.same_params.items()),
            otherwise="the ranks' parameters differ after the all-reduce: a bug, please report it"),
    ]
    out.append(step_check(r))
    return out


def machine_check(r: TrainingResult) -> Any:
    """Whether this machine can show a speed-up from overlap at all (``role="machine"``): a spare core
    for each busy thread of every gloo rank (its compute thread and gloo's worker), or NCCL."""
    having("r", r, ("ranks", "where"), what="a TrainingResult")
    busy = 2 * r.ranks
    gloo = r.where.backend == "gloo"
    return lesson.check(
        f"this machine had a spare core for each of the {busy} busy threads of {r.ranks} gloo ranks" if gloo else
        f"each of the {r.ranks} ranks had its own GPU (NCCL)",
        (not gloo) or r.where.threads_per_cpu(r.ranks) <= 1,
        shown=(f"{r.where.spare_cpus:.1f} spare of {r.where.usable_cpus:g} usable CPUs (load average "
               f"{r.where.load_avg:.1f})" if gloo else r.device),
        otherwise=(f"{r.where.cpu_sentence(r.ranks)}: the ranks time-shared the cores, so read the timelines for the "
                   "order of events and not the step times for a speed-up. On a machine with "
                   f"{busy} or more free cores, or on GPUs with NCCL, the bucketed step can get shorter"),
        role="machine")


def step_check(r: TrainingResult) -> Any:
    """"Overlapping communication with backward shortens the step" (``role="speed-up"``), credited only
    where (1) the machine could show a speed-up (:func:`machine_check`), (2) the bucketed steps are
    shorter beyond the spread of the timed steps (:func:`d2l_async.verdict.compare`) and (3) the time
    saved is no more than the communication the traces show hidden behind backward."""
    bucketed = r.comm["bucketed"]
    t_after, t_bucket = r.median_step("after_backward"), r.median_step("bucketed")
    hidden = float(np.mean([c.hidden_fraction for c in bucketed])) if bucketed else 0.0
    hidden_s = max((c.hidden_s for c in bucketed), default=0.0)
    exposed = {label: max((c.exposed_s for c in r.comm[label]), default=0.0) for label in ("after_backward", "bucketed")}
    name = "with a core for each busy thread (or a GPU each), overlapping communication with backward shortens the step"
    shown = (f"median step {1e3 * t_bucket:.1f} ms bucketed vs {1e3 * t_after:.1f} ms after backward "
             f"({len(r.step_s['bucketed'])} steps each); {hidden:.0%} of the bucketed communication hidden "
             f"({1e3 * hidden_s:.1f} ms); exposed communication {1e3 * exposed['bucketed']:.1f} ms bucketed vs "
             f"{1e3 * exposed['after_backward']:.1f} ms after backward")
    if r.ranks == 1:
        return lesson.check(name, None, shown=shown, role="speed-up",
                            unclear="one rank has nobody to talk to: its all-reduce is a local no-op, there is "
                                    "nothing to hide. Use 2 or more ranks")
    verdict = compare(r.step_s["bucketed"], r.step_s["after_backward"], names=("bucketed", "after backward"))
    if r.where.threads_per_cpu(r.ranks) > 1:
        # The machine verdict gates the credit: on time-shared cores a shorter step is not overlap.
        gated = overruled(verdict, None, "machine gate (no spare core per busy thread)")
        return lesson.check(name, gated, shown=shown, role="speed-up",
                            unclear=(f"{r.where.cpu_sentence(r.ranks)}: a hidden all-reduce was waiting for a core "
                                     "(or for the other rank, which waited for the same core), not progressing beside "
                                     "the backward pass, so step times here cannot show a speed-up either way. Run on "
                                     "a machine with a spare core per busy thread (or GPUs with NCCL)"))
    saved = t_after - t_bucket
    if verdict.holds is True and saved > hidden_s:
        capped = overruled(verdict, None, "capped: saved > hidden communication")
        return lesson.check(name, capped, shown=shown, role="speed-up",
                            unclear=(f"the bucketed step was {1e3 * saved:.1f} ms shorter, more than the "
                                     f"{1e3 * hidden_s:.1f} ms of communication hidden behind backward: the gain "
                                     "is not overlap (the load changed between steps?). More steps decide it"))
    return lesson.check(
        name, verdict, shown=shown, role="speed-up",
        otherwise=(f"{r.where.cpu_sentence(r.ranks) or 'NCCL ranks'}: cores enough, but the gradients "
                   f"({r.params_mb:.1f} MB) reduce in little time compared with the step; per-bucket launches cost "
                   "more than they hide. Raise width/depth or lower bucket_cap_mb"),
        unclear="the two ways' step times overlap within their spread: more steps, or a larger model, decide it")


def straggler_checks(r: TrainingResult) -> list[Any]:
    """Lesson checks of :func:`run_straggler` (not displayed), each decided against the spread of its samples.

    * the step: every timed step of the straggler setting against the even steps' median, as a share of
      the delay (:func:`d2l_async.verdict.within`: about the delay, within :data:`ABOUT`);
    * the waiting: per profiled step and even rank, the communication with no gradient compute beside
      it (exposed), over that rank's own even steps -- the time it spent waiting for the straggler after
      its own backward was done -- again as a share of the delay.  Communication hidden behind the
      rank's own backward is not waiting the straggler caused: a bucket launched during backward is
      "in communication" from its launch, whoever is late.
    """
    having("r", r, ("delay_s", "ranks"), what="a TrainingResult")
    delay = r.delay_s["straggler"]
    even_med, slow_med = r.median_step("even"), r.median_step("straggler")
    extra = slow_med - even_med
    where = r.where.cpu_sentence(r.ranks) or r.device
    step_extra = [t - even_med for t in r.step_s["straggler"]]
    tol = f"{1 - ABOUT:g}-{1 + ABOUT:g}x the delay"
    slowed_v = within(step_extra, delay, tolerance=ABOUT, names=("extra step time", "delay")) \
        if delay > 0 and r.ranks > 1 else None
    if slowed_v is not None and slowed_v.holds is not True:
        side = ("less than" if slowed_v.ratio < 1 else "more than")
        slowed_why = (f"the straggler's steps were {fmt_time(extra)} longer than the even ones, {side} its "
                      f"{fmt_time(delay)} delay ({where}): "
                      + ("while the slow rank slept, the other ranks had the cores to themselves and finished "
                         "their own work sooner, so part of the sleep was not added to the step"
                         if slowed_v.ratio < 1 else
                         "after its sleep the slow rank still had its own step to compute, and on busy cores its "
                         "compute took longer than the others'") + "; raise delay_ms or steps")
    else:
        slowed_why = ""
    slowed = lesson.check(
        "one slow rank slows every step by about its delay",
        slowed_v if slowed_v is not None else None,
        shown=f"median step {fmt_time(slow_med)} with rank {r.slow_rank} sleeping {fmt_time(delay)} vs "
              f"{fmt_time(even_med)} even ({fmt_change(extra)}, {len(r.step_s['straggler'])} steps each)",
        otherwise=slowed_why,
        unclear=(f"the steps varied about as much as the delay ({where}): raise delay_ms or steps"
                 if r.ranks > 1 else "a single rank has nobody to wait for: use ranks >= 2"))
    waits = r.extra_wait_s()
    samples = [w for ws in waits.values() for w in ws]
    per_rank = ", ".join(f"rank {k} {'/'.join(fmt_time(w) for w in ws)}" for k, ws in waits.items())
    name = "the other ranks spend about that delay waiting in the all-reduce, after their own backward"
    if r.ranks == 1 or not samples:
        return [slowed, lesson.check(name, None, shown=f"{len(samples)} profiled steps read",
                                     unclear="a single rank has nobody to wait for: use ranks >= 2" if r.ranks == 1
                                     else "the traces hold no profiled step windows: rerun run_straggler()")]
    v = within(samples, delay, tolerance=ABOUT, names=("extra waiting", "delay")) if delay > 0 else False
    med = statistics.median(samples)
    if v is not False and v.holds is False and v.ratio > 1:
        why = (f"they waited {fmt_time(med)} more per step, beyond {tol}: after its sleep the straggler still computed "
               f"its own forward and backward before its gradients arrived, and on {where} that took longer "
               "than the others'")
    elif v is not False and v.holds is False:
        why = (f"they waited only {fmt_time(med)} more per step: part of the delay fell while they still had their own "
               f"backward to compute, or the sleep let them run faster on shared cores ({where})")
    else:
        why = "no delay: use run_straggler(delay_ms > 0)"
    return [slowed, lesson.check(
        name, v,
        shown=(f"per profiled step, each even rank's exposed communication (waiting with no backward beside it) "
               f"grew over its own even steps by {per_rank}, against a {fmt_time(delay)} delay"),
        otherwise=why,
        unclear=(f"the {len(samples)} step(s) scatter across {tol} ({where}): more profiled steps or a longer "
                 "delay decide it"))]
