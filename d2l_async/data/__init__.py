"""Real torch.profiler traces shipped with the package, for the notebooks and the tests.

They were recorded with torch.profiler (Kineto) on NVIDIA GPUs and come from the test data of
HolisticTraceAnalysis (MIT licence, see ``LICENSE-HolisticTraceAnalysis`` and ``README.md`` here).

>>> from d2l_async.data import SAMPLES, load_sample
>>> trace = load_sample("a100_simple_add")            # doctest: +SKIP
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..trace import Trace

__all__ = ["SAMPLES", "DESCRIPTIONS", "sample_path", "load_sample"]

#: sample name -> one line saying what it is
DESCRIPTIONS: dict[str, str] = {
    "a100_simple_add": "A100: a small benchmark of tensor adds (1.3k events)",
    "a100_alexnet": "A100: AlexNet iterations (1.4k events)",
    "a100_cuda_event_sync": "A100: cudaEventSynchronize between streams (92 events)",
    "a100_nccl_step": "A100: a distributed training step with NCCL kernels (41k events, ts relative to baseTimeNanoseconds)",
    "a100_training_step": "A100 80GB: a training step whose launch queue runs hundreds deep (109k events)",
    "v100_training_step": "V100: a training step whose launch queue saturates near the CUDA cap of ~1024 (69k events)",
    "cpu_only": "a CPU-only trace with no GPU events (30 events)",
}
#: names accepted by :func:`sample_path` and :func:`load_sample`
SAMPLES: tuple[str, ...] = tuple(DESCRIPTIONS)


def sample_path(name: str) -> Path:
    """Path of the shipped sample trace ``name`` (a ``.json.gz`` file).

    Returns:
        The path of the installed ``<name>.json.gz`` file (``name`` may carry the suffix or not).

    Raises:
        ValueError: ``name`` is not one of :data:`SAMPLES`.
    """
    if not isinstance(name, str) or name.removesuffix(".json.gz") not in DESCRIPTIONS:
        raise ValueError(f"unknown sample trace {name!r}; choose one of {', '.join(SAMPLES)}")
    name = name.removesuffix(".json.gz")
    path = Path(str(resources.files(__name__).joinpath(f"{name}.json.gz")))
    if not path.is_file():  # a broken install, not a user error
        raise FileNotFoundError(f"sample trace {name!r} is missing from the installed package at {path}")
    return path


def load_sample(name: str) -> "Trace":
    """Load the shipped sample trace ``name`` as a :class:`~d2l_async.trace.Trace`.

    Returns:
        The sample read by :func:`~d2l_async.trace.read_chrome_trace` (its Python-stack lanes kept).
    """
    from ..trace import read_chrome_trace

    return read_chrome_trace(sample_path(name))
