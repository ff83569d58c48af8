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

from .. import claims, config, lesson
from ..verdict import compare, overruled, within
from .._words import fmt_time
from ..trace import Trace
from ..analysis import RankComm, comm_overlap, comm_per_step
from ..distributed import OnRanks, Where, check_backend, run_and_load, where
from ..distributed.ranks import STEP_LABEL, training_rank
from .collective import _int
from ._show import Displayed
from .._args import having

__all__ = ["TrainingResult", "run_overlap", "run_straggler", "overlap_checks", "straggler_checks", "machine_check",
           "step_check", "STRAGGLER_PROFILED_STEPS", "ABOUT", "BUCKETED", "MACHINE", "STEP", "SLOWED", "WAITS"]

#: Profiled steps per setting of :func:`run_straggler` (one sample each for the waiting check).
STRAGGLER_PROFILED_STEPS = 3
#: "About its delay": within this relative tolerance of the straggler's delay.
ABOUT = 0.5


@dataclass(frozen=True)
class TrainingResult(OnRanks, Displayed):
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

    def checks(self) -> list[Any]:
        """The checks of this run's claims: :func:`straggler_checks` for a straggler run, else
        :func:`overlap_checks` and :func:`machine_check`."""
        if "straggler" in self.labels:
            return straggler_checks(self)
        return [*overlap_checks(self), machine_check(self)]

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        rows = [(f"{label.replace('_', ' ')}: median step", fmt_time(self.median_step(label))) for label in self.labels]
        for label in self.labels:
            rows += [(f"{label.replace('_', ' ')}, rank {c.rank}: communication hidden / exposed",
                      f"{fmt_time(c.hidden_s)} / {fmt_time(c.exposed_s)}") for c in self.comm[label]]
        return (f"Ran on: {self.device}; {self.model}, {self.params_mb:.1f} MB of gradients, "
                f"{len(self.step_s[self.labels[0]])} timed steps each", rows)

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
BUCKETED = claims.claim(
    "10b.bucketed-overlaps", notebooks=("10b_ddp_overlap",),
    sentence="bucketed all-reduces overlap the backward pass; after-backward ones never do",
    book="§13.5 and DDP: a bucket's all-reduce starts while earlier layers are still differentiated",
    quantity="all-reduces overlapping a backward op, per rank, bucketed and after backward (the traces)",
    rule="fact: at least one on every rank bucketed, none after backward",
    says="overlapping per rank: bucketed {bucketed}; after {after}")
MACHINE = claims.claim(
    "10b.machine", notebooks=("10b_ddp_overlap",), headline=False, role="machine",
    sentence="this machine had a core for each of the {busy} busy threads",
    book="a hidden all-reduce progresses only with a core (or a GPU and a network card) for each side",
    quantity="spare CPUs against 2 busy threads per gloo rank", rule="fact: at most one busy thread per spare CPU",
    says="{spare} spare of {usable} usable CPUs")
STEP = claims.claim(
    "10b.step-shorter", notebooks=("10b_ddp_overlap",), headline=False, role="speed-up",
    sentence="overlapping communication with backward shortens the step",
    book="§13.5: overlap hides communication behind computation",
    quantity="bucketed / after-backward step time, every timed step; the saving against the hidden communication",
    rule="compare: the interval wholly below 1; credited only where the machine check holds and the saving is "
         "at most the hidden communication")
SLOWED = claims.claim(
    "10b.straggler", notebooks=("10b_ddp_overlap",),
    sentence="one slow rank slows every step by about its delay",
    book="§13.5: an all-reduce is a barrier; the slowest rank sets every rank's step",
    quantity="each straggler step's extra time over the even steps' median / the delay",
    rule=f"within: the interval wholly inside 1 ± {ABOUT:g}")
WAITS = claims.claim(
    "10b.others-wait", notebooks=("10b_ddp_overlap",), headline=False,
    sentence="the other ranks spend about that delay waiting in the all-reduce",
    book="§13.5: the others wait inside the collective for the slowest rank",
    quantity="per profiled step, each even rank's exposed communication over its own even steps / the delay",
    rule=f"within: the interval wholly inside 1 ± {ABOUT:g}")


def _per_rank(comm: tuple[RankComm, ...], attr: str) -> str:
    return ", ".join(f"rank {c.rank}: {getattr(c, attr)}" for c in comm)


def _cpus(r: TrainingResult) -> dict[str, str]:
    n = r.where.usable_cpus
    return {"cpus": f"{n:g} usable CPU{'' if n == 1 else 's'}, {r.where.spare_cpus:.1f} spare"}


def overlap_checks(r: TrainingResult) -> list[Any]:
    """Lesson checks of :func:`run_overlap` (not displayed).

    Returns:
        The checks of :data:`BUCKETED` and :data:`STEP`.
    """
    having("r", r, ("comm", "ranks"), what="a TrainingResult")
    bucketed, after = r.comm["bucketed"], r.comm["after_backward"]
    ok_b = all(c.overlapping >= 1 for c in bucketed)
    ok_a = all(c.overlapping == 0 for c in after)
    per_step = {c.rank: c.collectives for c in after}  # one all-reduce a step after backward
    none = [c for c in bucketed if c.overlapping < 1]
    if not ok_a:
        cause, facts = lesson.Cause.BUG, {"bug": "an all-reduce issued after backward() overlapped it"}
    elif r.ranks == 1:
        cause, facts = lesson.Cause.ONE_RANK, {}
    elif none and all(c.collectives <= per_step.get(c.rank, c.collectives) for c in none):
        cause, facts = lesson.Cause.TOO_SMALL, {"small": f"{r.params_mb:.1f} MB of gradients", "took": "one bucket",
                                                "beside": f"buckets of {r.bucket_cap_mb:g} MB"}
    elif r.where.backend == "gloo" and r.where.threads_per_cpu(r.ranks) > 1:
        cause, facts = lesson.Cause.NO_SPARE_CPU, {**_cpus(r), "threads": "each rank's gloo thread and its backward"}
    elif r.where.backend == "gloo":
        cause, facts = lesson.Cause.TRACE, {"seen": "the gloo threads reduced only after the backward ops"}
    else:
        cause, facts = lesson.Cause.GPU, {"gpu": "the NCCL kernels ran after the backward kernels"}
    return [BUCKETED.check(ok_b and ok_a, cause=cause, facts={
        **facts, "bucketed": ", ".join(str(c.overlapping) for c in bucketed),
        "after": ", ".join(str(c.overlapping) for c in after)},
        detail="all-reduces per step: " + _per_rank(bucketed, "collectives")), step_check(r)]


def machine_check(r: TrainingResult) -> Any:
    """Whether this machine can show a speed-up from overlap at all (``role="machine"``): a spare core
    for each busy thread of every gloo rank (its compute thread and gloo's worker), or NCCL.

    Returns:
        The check of :data:`MACHINE`.
    """
    having("r", r, ("ranks", "where"), what="a TrainingResult")
    gloo = r.where.backend == "gloo"
    return MACHINE.check((not gloo) or r.where.threads_per_cpu(r.ranks) <= 1, cause=lesson.Cause.NO_SPARE_CPU,
                         facts={**_cpus(r), "busy": 2 * r.ranks, "threads": f"{2 * r.ranks} busy threads",
                                "spare": f"{r.where.spare_cpus:.1f}", "usable": f"{r.where.usable_cpus:g}"})


def step_check(r: TrainingResult) -> Any:
    """:data:`STEP` (``role="speed-up"``), credited only where (1) the machine could show a speed-up
    (:func:`machine_check`), (2) the bucketed steps are shorter beyond the spread of the timed steps
    (:func:`d2l_async.verdict.compare`) and (3) the time saved is no more than the communication the
    traces show hidden behind backward.

    Returns:
        The :class:`~d2l_async.lesson.Check` (not displayed).
    """
    having("r", r, ("comm", "ranks", "where"), what="a TrainingResult of run_overlap()")
    bucketed = r.comm["bucketed"]
    t_after, t_bucket = r.median_step("after_backward"), r.median_step("bucketed")
    hidden_s = max((c.hidden_s for c in bucketed), default=0.0)
    detail = ("hidden communication per rank: " + ", ".join(f"rank {c.rank} {fmt_time(c.hidden_s)} of "
                                                            f"{fmt_time(c.comm_s)}" for c in bucketed)
              + f"; median steps {fmt_time(t_bucket)} vs {fmt_time(t_after)}")
    if r.ranks == 1:
        return STEP.check(None, cause=lesson.Cause.ONE_RANK, shown="one rank", detail=detail)
    verdict = compare(r.step_s["bucketed"], r.step_s["after_backward"], names=("bucketed", "after backward"))
    if r.where.threads_per_cpu(r.ranks) > 1:
        # The machine verdict gates the credit: on time-shared cores a shorter step is not overlap.
        return STEP.check(overruled(verdict, None, "machine gate (no spare core per busy thread)"),
                          cause=lesson.Cause.NO_SPARE_CPU, facts={**_cpus(r), "threads": f"{2 * r.ranks} busy threads"},
                          detail=detail)
    saved = t_after - t_bucket
    if verdict.holds is True and saved > hidden_s:
        return STEP.check(overruled(verdict, None, "capped: saved > hidden communication"),
                          cause=lesson.Cause.EXCEEDS_CAUSE, detail=detail, facts={
                              "gain": "the saving", "amount": fmt_time(saved), "cap": fmt_time(hidden_s),
                              "source": "the hidden communication"})
    if verdict.holds is None:
        cause, facts = lesson.Cause.SPREAD, {"runs": f"{verdict.n_a} vs {verdict.n_b} steps"}
    else:
        cause, facts = lesson.Cause.TOO_SMALL, {"small": f"{r.params_mb:.1f} MB of gradients", "took": fmt_time(
            max((c.comm_s for c in bucketed), default=0.0)), "beside": "the step: per-bucket launches cost more"}
    return STEP.check(verdict, cause=cause, facts=facts, detail=detail)


def straggler_checks(r: TrainingResult) -> list[Any]:
    """Lesson checks of :func:`run_straggler` (not displayed), each decided against the spread of its samples.

    * the step: every timed step of the straggler setting against the even steps' median, as a share of
      the delay (:func:`d2l_async.verdict.within`: about the delay, within :data:`ABOUT`);
    * the waiting: per profiled step and even rank, the communication with no gradient compute beside
      it (exposed), over that rank's own even steps -- the time it spent waiting for the straggler after
      its own backward was done -- again as a share of the delay.

    Returns:
        The checks of :data:`SLOWED` and :data:`WAITS`.
    """
    having("r", r, ("delay_s", "ranks"), what="a TrainingResult")
    delay = r.delay_s["straggler"]
    even_med = r.median_step("even")
    if r.ranks == 1 or delay <= 0:
        one = (lesson.Cause.ONE_RANK, {}) if r.ranks == 1 else (
            lesson.Cause.MISSING, {"missing": "no delay: use run_straggler(delay_ms > 0)"})
        return [SLOWED.check(None, cause=one[0], facts=one[1], shown=f"{r.ranks} rank(s)"),
                WAITS.check(None, cause=one[0], facts=one[1], shown=f"{r.ranks} rank(s)")]
    step_extra = [t - even_med for t in r.step_s["straggler"]]
    v = within(step_extra, delay, tolerance=ABOUT, names=("extra step time", "delay"))
    out = [SLOWED.check(v, **_within_cause(r, v, "while the slow rank slept, the others had the cores to themselves",
                                           "after its sleep the slow rank still computed its own step"),
                        detail=f"median step {fmt_time(r.median_step('straggler'))} vs {fmt_time(even_med)} even, "
                               f"delay {fmt_time(delay)}")]
    waits = r.extra_wait_s()
    samples = [w for ws in waits.values() for w in ws]
    if not samples:
        return [*out, WAITS.check(None, cause=lesson.Cause.MISSING, shown="no profiled step", facts={
            "missing": "the traces hold no profiled step windows: rerun run_straggler()"})]
    w = within(samples, delay, tolerance=ABOUT, names=("extra waiting", "delay"))
    per_rank = ", ".join(f"rank {k} {'/'.join(fmt_time(x) for x in ws)}" for k, ws in waits.items())
    out.append(WAITS.check(w, **_within_cause(r, w, "part of the delay fell while they still had their own backward",
                                              "after its sleep the straggler still computed its own step"),
                           detail=f"extra exposed communication per profiled step: {per_rank}"))
    return out


def _within_cause(r: TrainingResult, v: Any, less: str, more: str) -> dict[str, Any]:
    """The cause of a "within the delay" verdict that did not hold: the spread, or the CPUs the ranks shared
    (their steps took more or less than the delay because they competed for the cores)."""
    if v.holds is None:
        return {"cause": lesson.Cause.SPREAD, "facts": {"runs": f"{v.n_a} steps"}}
    if r.where.backend == "gloo" and r.where.threads_per_cpu(r.ranks) > 1:
        return {"cause": lesson.Cause.NO_SPARE_CPU, "facts": {**_cpus(r), "threads": f"{2 * r.ranks} busy threads"}}
    return {"cause": lesson.Cause.TRACE, "facts": {"seen": less if v.ratio < 1 else more}}


# ---------------------------------------------------------------------------------------------
# what makes each claim false: synthetic results
# ---------------------------------------------------------------------------------------------
def _example(*, bucketed_overlap: int = 2, after_overlap: int = 0, collectives: int = 3,
             bucketed_steps: tuple[float, ...] = (0.08,) * 5,
             after_steps: tuple[float, ...] = (0.1,) * 5, hidden: float = 0.03, cpus: float = 8.0, spare: float = 8.0,
             ranks: int = 2, delay: float = 0.0, straggler_steps: tuple[float, ...] = ()) -> TrainingResult:
    """A synthetic two-setting result (after_backward/bucketed, or even/straggler when ``delay``)."""
    comm_b = tuple(RankComm(k, collectives, bucketed_overlap, 0.04, hidden, 0.05) for k in range(ranks))
    comm_a = tuple(RankComm(k, 1, after_overlap, 0.04, 0.0, 0.05) for k in range(ranks))
    at = Where("example", "gloo", cpus, spare, 0.0, ())
    if delay:
        steps = {"even": bucketed_steps, "straggler": straggler_steps}
        comm = {"even": comm_b, "straggler": comm_b}
        labels, modes = ("even", "straggler"), {"even": "bucketed", "straggler": "bucketed"}
    else:
        steps = {"after_backward": after_steps, "bucketed": bucketed_steps}
        comm = {"after_backward": comm_a, "bucketed": comm_b}
        labels, modes = ("after_backward", "bucketed"), {"after_backward": "after_backward", "bucketed": "bucketed"}
    return TrainingResult(ranks, labels, modes, steps, {}, comm, {k: True for k in labels}, 1.0,
                          {labels[0]: 0.0, labels[1]: delay}, ranks - 1, "MLP 512x6", 6.0, at, 1.0)


def _spread(x: float, n: int = 5) -> tuple[float, ...]:
    return tuple(x * (1 + 0.01 * (k - n // 2)) for k in range(n))


def _register() -> None:
    claims.falsifier(BUCKETED, "bucketed all-reduces that never overlap backward",
                     lambda: overlap_checks(_example(bucketed_overlap=0))[0])
    claims.counterfactual(BUCKETED, "one bucket a step (buckets as large as the gradients)", lesson.Cause.TOO_SMALL,
                          lambda: overlap_checks(_example(bucketed_overlap=0, collectives=1))[0])
    claims.counterfactual(BUCKETED, "several buckets, none during backward, four busy threads on one CPU",
                          lesson.Cause.NO_SPARE_CPU, lambda: overlap_checks(_example(bucketed_overlap=0, cpus=1,
                                                                                     spare=0))[0])
    claims.counterfactual(BUCKETED, "several buckets, none during backward, eight spare CPUs", lesson.Cause.TRACE,
                          lambda: overlap_checks(_example(bucketed_overlap=0))[0])
    claims.counterfactual(BUCKETED, "an after-backward all-reduce overlapping backward", lesson.Cause.BUG,
                          lambda: overlap_checks(_example(after_overlap=1))[0])
    claims.falsifier(MACHINE, "one usable CPU for four busy threads",
                     lambda: machine_check(_example(cpus=1, spare=0)))
    claims.counterfactual(MACHINE, "one usable CPU for four busy threads", lesson.Cause.NO_SPARE_CPU,
                          lambda: machine_check(_example(cpus=1, spare=0)))
    claims.falsifier(STEP, "the same step times", lambda: step_check(
        _example(bucketed_steps=_spread(0.1), after_steps=_spread(0.1))))
    claims.falsifier(STEP, "a saving larger than the hidden communication",
                     lambda: step_check(_example(bucketed_steps=_spread(0.05), after_steps=_spread(0.1), hidden=0.01)))
    claims.counterfactual(STEP, "a saving larger than the hidden communication", lesson.Cause.EXCEEDS_CAUSE,
                          lambda: step_check(_example(bucketed_steps=_spread(0.05), after_steps=_spread(0.1),
                                                      hidden=0.01)))
    claims.counterfactual(STEP, "one CPU for four busy threads", lesson.Cause.NO_SPARE_CPU,
                          lambda: step_check(_example(cpus=1, spare=0)))
    claims.counterfactual(STEP, "one rank", lesson.Cause.ONE_RANK, lambda: step_check(_example(ranks=1)))
    claims.falsifier(SLOWED, "straggler steps as long as the even ones", lambda: straggler_checks(
        _example(delay=0.1, bucketed_steps=_spread(0.1), straggler_steps=_spread(0.1)))[0])
    claims.counterfactual(SLOWED, "one rank", lesson.Cause.ONE_RANK, lambda: straggler_checks(
        _example(delay=0.1, ranks=1, bucketed_steps=_spread(0.1), straggler_steps=_spread(0.2)))[0])
    claims.counterfactual(SLOWED, "no extra step time, one CPU for four busy threads", lesson.Cause.NO_SPARE_CPU,
                          lambda: straggler_checks(_example(delay=0.1, cpus=1, spare=0, bucketed_steps=_spread(0.1),
                                                            straggler_steps=_spread(0.1)))[0])
    claims.falsifier(WAITS, "no profiled steps to read", lambda: straggler_checks(
        _example(delay=0.1, bucketed_steps=_spread(0.1), straggler_steps=_spread(0.2)))[1])
    claims.counterfactual(WAITS, "no profiled steps to read", lesson.Cause.MISSING, lambda: straggler_checks(
        _example(delay=0.1, bucketed_steps=_spread(0.1), straggler_steps=_spread(0.2)))[1])


_register()
