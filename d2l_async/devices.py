"""Which devices this machine offers: D2L's ``try_gpu``/``try_all_gpus``, done right.

The book's v1.0 ``try_all_gpus()`` returns ``[]`` on a machine without a GPU, contradicting its own
docstring ("return all available GPUs, or [cpu(),] if no GPU exists"); ours always returns at least
``[torch.device("cpu")]`` so code that iterates over devices runs everywhere.
"""

from __future__ import annotations

import platform

import torch

from ._machine import Machine, read_machine
from ._args import having, number

__all__ = ["num_gpus", "try_gpu", "try_all_gpus", "describe_machine", "cuda_available", "machine",
           "Machine"]


def cuda_available() -> bool:
    """Whether torch can use CUDA here.

    Returns:
        ``torch.cuda.is_available()``: ``True`` when a CUDA device and driver are usable.
    """
    return torch.cuda.is_available()


def num_gpus() -> int:
    """Number of CUDA devices visible to torch (0 without CUDA).

    Returns:
        The number of visible CUDA devices; 0 when CUDA is not available.
    """
    return torch.cuda.device_count() if cuda_available() else 0


def try_gpu(i: int = 0) -> torch.device:
    """GPU ``i`` if it exists, else the CPU (as in D2L).

    Returns:
        ``torch.device("cuda:i")`` when at least ``i + 1`` GPUs are visible, else ``torch.device("cpu")``.

    Raises:
        ValueError: ``i`` is negative or not an integer.
    """
    if isinstance(i, bool) or not isinstance(i, int) or i < 0:
        raise ValueError(f"try_gpu(i): i must be a non-negative int, got {i!r}")
    if num_gpus() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


def try_all_gpus() -> list[torch.device]:
    """All GPUs, or ``[cpu]`` when there is none: never empty.

    Returns:
        ``cuda:0`` ... ``cuda:n-1`` for the n visible GPUs, or ``[torch.device("cpu")]`` when there is none.
    """
    gpus = [torch.device(f"cuda:{i}") for i in range(num_gpus())]
    return gpus or [torch.device("cpu")]


def gpu_names() -> tuple[str, ...]:
    """Names of the CUDA devices torch sees (empty without CUDA)."""
    return tuple(torch.cuda.get_device_name(i) for i in range(num_gpus()))


def machine(*, sample_s: float = 0.1) -> Machine:
    """What this process may really use: CPUs (affinity and cgroup quota), their load, the
    container's RAM, the GPUs.  Every statement about CPUs or RAM comes from here, never from
    ``os.cpu_count()`` (see :mod:`d2l_async._machine`).

    Args:
        sample_s: how long to watch ``/proc/stat`` to measure other work on our CPUs (0: skip).

    Returns:
        The :class:`Machine` snapshot: usable, affinity, quota and host CPUs, the load average, available and limit
        memory, the GPU names and (with ``sample_s > 0``) the CPUs' worth of other work measured on our CPUs.
    """
    # a longer watch says nothing more about the load, and time.sleep(inf) never returns
    sample_s = number("sample_s", sample_s, minimum=0, maximum=60)
    return read_machine("/", gpus=gpu_names(), sample_s=sample_s)


def describe_machine(m: Machine | None = None) -> str:
    """One line on what this machine offers, e.g. ``"CPU only: 1 usable CPU (pinned to 1 of 2), ..."``
    or ``"1 GPU: NVIDIA H200; 16 usable CPUs ..."``.

    Returns:
        The one-line description: the GPU count and names (or "CPU only"), then :meth:`Machine.describe`'s CPU, load
        and memory statement (its GPU clause left out: the line names each GPU once), the processor name and
        torch's version. ``m`` defaults to a fresh :func:`machine`.
    """
    if m is not None:
        having("m", m, ("gpus", "describe"), what="a Machine (d2l_async.devices.machine()) or None")
    m = m or machine()
    cpu = platform.processor() or platform.machine()
    cpus = m.describe(gpus=False)  # the line names the GPUs itself, first
    if m.gpus:
        n = len(m.gpus)
        return f"{n} GPU{'s' if n > 1 else ''}: {', '.join(m.gpus)}; {cpus}; {cpu}, torch {torch.__version__}"
    return f"CPU only: {cpus}; {cpu}, torch {torch.__version__}"
