"""Which devices this machine offers: D2L's ``try_gpu``/``try_all_gpus``, done right.

The book's v1.0 ``try_all_gpus()`` returns ``[]`` on a machine without a GPU, contradicting its own
docstring ("return all available GPUs, or [cpu(),] if no GPU exists"); ours always returns at least
``[torch.device("cpu")]`` so code that iterates over devices runs everywhere.
"""

from __future__ import annotations

import platform

import torch

__all__ = ["num_gpus", "try_gpu", "try_all_gpus", "describe_machine", "cuda_available"]


def cuda_available() -> bool:
    return torch.cuda.is_available()


def num_gpus() -> int:
    """Number of CUDA devices visible to torch (0 without CUDA)."""
    return torch.cuda.device_count() if cuda_available() else 0


def try_gpu(i: int = 0) -> torch.device:
    """GPU ``i`` if it exists, else the CPU (as in D2L).

    Raises:
        ValueError: ``i`` is negative or not an integer.
    """
    if isinstance(i, bool) or not isinstance(i, int) or i < 0:
        raise ValueError(f"try_gpu(i): i must be a non-negative int, got {i!r}")
    if num_gpus() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


def try_all_gpus() -> list[torch.device]:
    """All GPUs, or ``[cpu]`` when there is none: never empty."""
    gpus = [torch.device(f"cuda:{i}") for i in range(num_gpus())]
    return gpus or [torch.device("cpu")]


def describe_machine() -> str:
    """One line on what this machine offers, e.g. ``"1 GPU: NVIDIA H200"`` or ``"CPU only: ..."``."""
    n = num_gpus()
    if n:
        names = [torch.cuda.get_device_name(i) for i in range(n)]
        return f"{n} GPU{'s' if n > 1 else ''}: {', '.join(names)}"
    import os

    cores = os.cpu_count() or 1
    cpu = platform.processor() or platform.machine()
    return f"CPU only: {cores} core{'s' if cores > 1 else ''} ({cpu}), torch {torch.__version__}"
