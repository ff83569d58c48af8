"""Capture JAX work with ``jax.profiler`` and read it as a :class:`~d2l_async.trace.Trace`.

JAX is the outside check on what the engine teaches: its CPU backend dispatches asynchronously, as a
GPU framework does, so the chapter's lessons can be run on a laptop in a production framework and
drawn from its own profiler's trace by the same figures.  It is optional (``pip install
"d2l-async[jax]"``, the CPU wheel): nothing here imports it until a function is called, and a call
without it raises :class:`JaxMissing`, which says how to get it.

* :func:`jax_capture` runs a function inside ``jax.profiler.trace`` (its Python tracer off: the trace
  holds the runtime's slices only) and returns :func:`~d2l_async.trace.read_jax_trace`'s trace;
* :func:`jax_wait` names a wait in the trace (the reader files it as a ``block`` with its reason and
  source line, when the value was not ready yet);
* :func:`jax_waitall` waits for everything dispatched to a device: JAX has no ``waitall``, but XLA's
  CPU client runs each device's executions in the order they were dispatched (a hundred independent
  products ran one after another in the traces recorded here), so waiting for a fresh result computed
  last waits for everything before it;
* :func:`jax_cpu_devices` gives ``n`` CPU devices: JAX makes one by default and more only if asked
  before its first operation.
"""

from __future__ import annotations

import contextlib
import tempfile
from typing import Any, Callable

from ..trace import JAX_WAIT, Trace, read_jax_trace
from .._args import integer

__all__ = ["JAX_INSTALL", "JaxMissing", "have_jax", "import_jax", "jax_capture", "jax_cpu_devices", "jax_label",
           "jax_wait", "jax_waitall"]

#: How to get JAX for these functions (the CPU wheel)
JAX_INSTALL = 'pip install "d2l-async[jax]"  (JAX\'s CPU wheel; or: pip install "jax[cpu]")'


class JaxMissing(ModuleNotFoundError):
    """JAX is not installed here; the message says how to install it."""


def have_jax() -> bool:
    """Whether JAX can be imported here (without importing it).

    Returns:
        ``True`` when the ``jax`` package is installed.
    """
    import importlib.util

    return importlib.util.find_spec("jax") is not None


def import_jax() -> Any:
    """The ``jax`` module.

    Returns:
        ``jax``, imported.

    Raises:
        JaxMissing: JAX is not installed; the message gives :data:`JAX_INSTALL`.
    """
    try:
        import jax
    except ModuleNotFoundError as exc:
        if exc.name not in ("jax", "jaxlib"):
            raise
        raise JaxMissing(f"this needs JAX, which is not installed here ({exc.name} is missing): {JAX_INSTALL}, "
                         "then restart the kernel") from None
    return jax


def jax_cpu_devices(n: int = 1) -> tuple[Any, ...]:
    """``n`` of JAX's CPU devices, asking JAX for ``n`` when it has not run anything yet.

    Args:
        n: how many CPU devices are needed (JAX makes 1 unless asked before its first operation).

    Returns:
        A tuple of the first ``n`` ``jax.devices("cpu")``.

    Raises:
        JaxMissing: JAX is not installed.
        RuntimeError: JAX has already started with fewer CPU devices; the message says how to get more.
    """
    n = integer("n", n, minimum=1, maximum=64)
    jax = import_jax()
    asked = getattr(jax.config, "jax_num_cpu_devices", None)  # None: a JAX without the option (before 0.5)
    if n > 1 and asked is not None and asked < n:
        with contextlib.suppress(RuntimeError):  # raised once JAX has run something: then count what it has
            jax.config.update("jax_num_cpu_devices", n)
    devices = jax.devices("cpu")
    if len(devices) < n:
        raise RuntimeError(f"this needs {n} JAX CPU devices, and JAX has already started with {len(devices)}: "
                           f"restart the kernel and run this before any other JAX code (it asks JAX for {n}), "
                           f"or set XLA_FLAGS=--xla_force_host_platform_device_count={n} before importing jax")
    return tuple(devices[:n])


def jax_label(n_devices: int = 1) -> str:
    """The honest one-line description of a JAX run on this machine's CPU.

    Returns:
        E.g. ``"CPU: JAX 0.10.2, 1 XLA CPU device on 2 usable CPUs (the runtime's own threads, not a GPU)"``.

    Raises:
        JaxMissing: JAX is not installed.
    """
    from .._machine import read_machine

    n_devices = integer("n_devices", n_devices, minimum=1, maximum=64)
    jax = import_jax()
    usable = read_machine("/", sample_s=0).usable_cpus
    dev = "device" if n_devices == 1 else "devices"
    return (f"CPU: JAX {jax.__version__}, {n_devices} XLA CPU {dev} on {usable:g} usable CPU"
            f"{'' if usable == 1 else 's'} (the runtime's own threads, not a GPU)")


def jax_wait(reason: str, source: str = "") -> Any:
    """A context manager that names the wait inside it in the trace (``jax.profiler.TraceAnnotation``).

    >>> with jax_wait("print", "print(b)"):        # doctest: +SKIP
    ...     print(b)

    Args:
        reason: why the frontend waits (``"print"``, ``"item"``, ``"block_until_ready"``).
        source: the statement that waits, as the reader should see it.

    Returns:
        The annotation context manager; outside a profiler session it costs about a microsecond.

    Raises:
        JaxMissing: JAX is not installed.
    """
    if not isinstance(reason, str) or not reason:
        raise ValueError(f"reason must be a non-empty string (why the frontend waits), got {reason!r}")
    if not isinstance(source, str):
        raise TypeError(f"source must be a string (the statement that waits), got {type(source).__name__}")
    return import_jax().profiler.TraceAnnotation(JAX_WAIT, reason=reason, source=source)


def jax_waitall(device: Any = None) -> None:
    """Wait until everything dispatched to ``device`` (default: JAX's default CPU device) has run.

    Returns:
        None, once a fresh computation queued behind all earlier ones on the device is done.

    Raises:
        JaxMissing: JAX is not installed.
        TypeError: ``device`` is not a ``jax.Device``.
    """
    jax = import_jax()
    import numpy as np

    if device is None:
        device = jax.devices("cpu")[0]
    elif not isinstance(device, jax.Device):
        raise TypeError(f"device must be a jax.Device (jax.devices('cpu')[i]) or None, got {type(device).__name__} "
                        f"{device!r}")
    zero = jax.device_put(np.zeros((), dtype=np.float32), device)
    (zero + 1).block_until_ready()  # an execution after every earlier one on the device


def jax_capture(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Trace:
    """Run ``fn(*args, **kwargs)`` under ``jax.profiler`` and return its trace.

    The recording stops once what ``fn`` returned (a JAX array, a pytree of them, or anything else) is
    ready, so return the arrays whose work the trace must hold.  The profiler's Python tracer is off:
    the trace holds JAX's own slices (dispatches, executions, waits), not every Python call.

    Returns:
        :func:`~d2l_async.trace.read_jax_trace`'s trace, ``meta["jax_version"]`` added.

    Raises:
        JaxMissing: JAX is not installed.
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable (the work to capture), got {type(fn).__name__}")
    jax = import_jax()
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    with tempfile.TemporaryDirectory(prefix="d2l_async_jax_") as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True, profiler_options=options):
            out = fn(*args, **kwargs)
            jax.block_until_ready(out)
        trace = read_jax_trace(tmp)
    return trace.with_meta(jax_version=jax.__version__, path="")
