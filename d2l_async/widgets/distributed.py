"""The dashboard of notebook 10: ranks, bucket size and a straggler's delay -> traces and bars.

Each change starts a fresh set of rank processes (:func:`d2l_async.experiments.run_overlap`): the
same MLP trained with its gradients all-reduced after the backward pass and bucketed during it
(DDP), one step of each profiled on every rank.  Two figures update in place: the bucketed step's
multi-rank timeline (each rank's frontend above its gloo/NCCL communication lane) and the bars of
hidden vs exposed communication per setting and rank, with the median step time.

A run costs a process per rank: about :data:`RANK_BYTES` of memory each (torch loaded; measured
~400 MiB RSS, ~250 MiB proportional share, on torch 2.13 CPU), so the guard refuses rank counts
that would not fit in the memory free now (Binder's 2 GB holds two or three).
"""

from __future__ import annotations

from typing import Any, Mapping

from ._controls import float_slider, int_slider
from ._dashboard import Dashboard
from ._guards import check_bytes
from .._args import instance

__all__ = ["RANK_BYTES", "distributed_dashboard", "ranks_guard"]

#: Memory one rank process takes (torch imported, the MLP, the profiler's buffers), pessimistic.
RANK_BYTES = 400 * 2**20


def ranks_guard(values: Mapping[str, Any], *, available: int | None = None) -> str | None:
    """Refuse rank counts whose processes would not fit in the free memory."""
    instance("values", values, Mapping, what="mapping of control values")
    ranks = int(values.get("ranks", 1))
    return check_bytes(ranks * RANK_BYTES, what=f"ranks={ranks} (one process of ~400 MiB each)",
                       available=available)


def _timeline(r: Any) -> Any:
    from d2l_async import viz

    comm = r.comm["bucketed"]
    detail = (f"{r.model}, buckets of {r.bucket_cap_mb:g} MB; all-reduces during backward: "
              + ", ".join(f"rank {c.rank} {c.overlapping}/{c.collectives}" for c in comm))
    return viz.plot_timeline(r.traces["bucketed"], title=f"DDP, bucketed: {r.ranks} ranks<br><sup>{detail}</sup>")


def _bars(r: Any) -> Any:
    from d2l_async import viz

    delay = max(r.delay_s.values())
    straggler = f"; rank {r.slow_rank} sleeps {1e3 * delay:.0f} ms per step" if delay else ""
    return viz.plot_comm_overlap(
        r.rows(), title=f"Hidden vs exposed communication<br><sup>{r.ranks} {r.where.backend} ranks{straggler}</sup>")


def distributed_dashboard(*, mode: str = "auto", autorun: bool = True, backend: str = "auto",
                          timeout: float = 180.0) -> Dashboard:
    """Ranks, DDP bucket size and a straggler's delay; the timeline and the hidden/exposed bars.

    Args:
        mode: ``"figurewidget"``, ``"output"`` (Colab) or ``"auto"``.
        autorun: run once now with the initial values (2 ranks, 1 MB buckets, no straggler).
        backend: ``"auto"`` (NCCL when each rank can have a GPU), ``"gloo"`` or ``"nccl"``.
        timeout: seconds before a run's ranks are ended.
    """

    def experiment(*, ranks: int, bucket_cap_mb: float, delay_ms: float) -> Any:
        from d2l_async.experiments import run_overlap

        return run_overlap(ranks=ranks, bucket_cap_mb=bucket_cap_mb, delay_ms=delay_ms, backend=backend,
                           timeout=timeout)

    def describe(r: Any) -> str:
        return (f"median step {1e3 * r.median_step('after_backward'):.1f} ms after backward, "
                f"{1e3 * r.median_step('bucketed'):.1f} ms bucketed; {r.device}")

    return Dashboard(
        experiment,
        {"ranks": int_slider("ranks", 2, 1, 4),
         "bucket_cap_mb": float_slider("bucket (MB)", 1.0, 0.25, 8.0, step=0.25),
         "delay_ms": float_slider("straggler delay (ms)", 0.0, 0.0, 100.0, step=5.0, readout_format=".0f")},
        {"timeline": _timeline, "communication": _bars},
        guard=ranks_guard, title="Data-parallel training: when is the gradient all-reduce paid for?",
        describe=describe, mode=mode, autorun=autorun,
    )
