"""What the distributed experiments share: where they ran, and reading the ranks' traces back."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from .._args import integer
from .._args import path as as_path
from ..trace import Trace, read_trace_dir
from ._launch import BACKENDS, LaunchResult, launch

__all__ = ["Where", "where", "run_and_load", "check_backend"]


@dataclass(frozen=True)
class Where:
    """The machine a distributed run had, measured just before it started.

    Attributes:
        device: one honest line (``"2 gloo ranks (processes) on CPU only: 2 usable CPUs ..."``).
        backend: ``"gloo"`` or ``"nccl"``.
        usable_cpus: CPUs the ranks may use (affinity and cgroup quota; ranks inherit both).
        spare_cpus: usable CPUs not already busy with other work.
        load_avg: the host's 1-minute load average.
        gpus: GPU names (empty on a CPU machine).
    """

    device: str
    backend: str
    usable_cpus: float
    spare_cpus: float
    load_avg: float
    gpus: tuple[str, ...]

    def threads_per_cpu(self, ranks: int) -> float:
        """Busy threads per spare CPU: each gloo rank runs a compute thread and a gloo thread."""
        return 2 * ranks / max(self.spare_cpus, 1e-9) if self.backend == "gloo" else 0.0

    def cpu_sentence(self, ranks: int) -> str:
        """Why one core cannot show parallel progress, in numbers (empty on NCCL)."""
        if self.backend != "gloo":
            return ""
        return (f"{ranks} ranks x (a compute thread + a gloo thread) = {2 * ranks} busy threads on "
                f"{self.usable_cpus:g} usable CPU(s), {self.spare_cpus:.1f} spare (load average {self.load_avg:.1f})")



class OnRanks:
    """What every distributed result says about where it ran (a mixin for the frozen results).

    Real processes in a real process group: never virtual, whatever the device.
    """

    where: Where

    @property
    def device(self) -> str:
        return self.where.device

    @property
    def virtual(self) -> bool:
        return False

def check_backend(backend: str, ranks: int) -> str:
    """``"auto"`` -> ``"nccl"`` when every rank can have its own GPU, else ``"gloo"``.

    Returns:
        The backend name: ``"nccl"`` or ``"gloo"`` for ``"auto"``, else ``backend`` itself once it is one of
        :data:`BACKENDS`.

    Raises:
        ValueError: ``backend`` is neither ``"auto"`` nor one of :data:`BACKENDS`.
    """
    if backend == "auto":
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return "nccl" if n >= ranks else "gloo"
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: use 'auto' or one of {BACKENDS}")
    return backend


def where(backend: str, ranks: int) -> Where:
    """Measure the machine (``devices.machine()``) and describe the run honestly.

    Returns:
        The frozen :class:`Where`: the honest device line, ``backend``, the usable and spare CPUs, the load average
        and the GPU names.
    """
    from d2l_async.devices import describe_machine, machine

    m = machine()
    if backend == "nccl":
        device = f"{ranks} NCCL ranks (processes), one GPU each: {', '.join(m.gpus[:ranks])}"
    else:
        device = f"{ranks} gloo ranks (processes) on the CPU, no GPU used — {describe_machine(m)}"
    return Where(device, backend, float(m.usable_cpus), float(m.spare_cpus), float(m.load_avg), tuple(m.gpus))


@contextmanager
def _trace_root(trace_dir: str | Path | None) -> Iterator[Path]:
    if trace_dir is not None:
        path = as_path("trace_dir", trace_dir)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    tmp = tempfile.mkdtemp(prefix="d2l_async_ranks_")
    try:
        yield Path(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_and_load(fn: Callable[..., Any], ranks: int, *, backend: str, labels: tuple[str, ...], timeout: float,
                 options: Mapping[str, Any], trace_dir: str | Path | None = None,
                 ) -> tuple[LaunchResult, dict[str, Trace]]:
    """Launch ``fn`` on ``ranks`` ranks, then merge each profiled section's per-rank files.

    Returns:
        The launch result and ``{label: merged Trace}`` (one lane group per rank).  The files are
        deleted afterwards unless ``trace_dir`` was given.
    """
    ranks = integer("ranks", ranks, minimum=1, maximum=64)
    with _trace_root(trace_dir) as root:
        res = launch(fn, ranks, backend=backend, trace_dir=root, timeout=timeout, options=options)
        traces = {label: read_trace_dir(root / label) for label in labels}
    return res, traces
