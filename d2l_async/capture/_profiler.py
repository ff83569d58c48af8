"""Capture real work with ``torch.profiler`` and turn it into a :class:`~d2l_async.trace.Trace`.

With CUDA, the profiler records both sides of the asynchrony the chapter is about: the Python
thread's ops and its ``cudaLaunchKernel``/``cudaMemcpyAsync`` calls (the frontend), and the kernels
and copies on each CUDA stream (the backend), joined by correlation ids.  We export the profiler's
Chrome trace to a temporary file and read it with :func:`d2l_async.trace.read_chrome_trace`, so a
live capture and a trace file a reader recorded themselves go through the same parser.

Without a GPU (Binder, a laptop) ``device="cpu"`` records CPU activity only: the ops appear on the
frontend lane and there are no backend lanes, and the trace says so in ``meta``.

Three facts of a CUDA run are added to what the file says:

* the capture waits for **every** GPU the process has used, before and after (``Capture("cuda:1")`` and
  multi-GPU code would otherwise lose the kernels still queued on the other devices);
* a ``cudaMemcpyAsync`` whose copy lands in pageable host memory (``Memcpy DtoH (Device -> Pageable)``:
  ``.cpu()``, ``.numpy()``) holds the CPU until the copy is done, so it is a wait (a ``block``, reason
  ``"cudaMemcpyAsync (Device -> Pageable)"``), not a launch that returns at once (the reader files it so in
  every profiler file; :func:`blocking_copies` does it for traces that do not yet).  ``.item()`` and
  ``float()`` copy into *pinned* memory instead (``Memcpy DtoH (Device -> Pinned)``, torch's
  ``_local_scalar_dense_cuda``): that copy call returns at once, and the wait is the
  ``cudaStreamSynchronize`` right after it, which the file names as a wait already;
* each wait's ``source`` names the ATen op that made it (``"aten::item"``), so a blocker report of a
  CUDA run says which call waited instead of one "(unknown)" bar.

torch is imported here only, when a capture starts.
"""

from __future__ import annotations

import os
import platform
import tempfile
from typing import Any, Callable

from ..trace import BLOCKING_COPY_REASON, Kind, Trace, read_chrome_trace
from ._quiet import quiet_kineto
from .._args import TRACE_HINT, flag, having, instance

__all__ = ["BLOCKING_COPY_REASON", "CAPTURE_SYNC_SOURCE", "Capture", "blocking_copies", "capture",
           "label_block_sources", "label_final_sync", "synchronize_all"]

_DEVICES = ("cuda", "cpu")


def _check_device(device: str) -> str:
    if not isinstance(device, str) or device.split(":")[0] not in _DEVICES:
        raise ValueError(f"device must be 'cuda' or 'cpu', got {device!r}")
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' needs a CUDA GPU, and torch.cuda.is_available() is False here; "
                           "use device='cpu' to capture CPU activity only")
    return device


class Capture:
    """Profile the body of a ``with`` block.

    >>> with Capture(device="cpu") as cap:                # doctest: +SKIP
    ...     y = x @ x
    >>> cap.trace                                         # doctest: +SKIP

    Args:
        device: ``"cuda"`` (CPU and CUDA activity; waits for the GPU before stopping, so every
            kernel launched in the block is recorded: that last ``cudaDeviceSynchronize`` has
            ``source`` :data:`CAPTURE_SYNC_SOURCE`) or ``"cpu"`` (CPU activity only).
        record_shapes: pass-through to ``torch.profiler.profile``.
    """

    def __init__(self, device: str = "cuda", *, record_shapes: bool = False) -> None:
        self.record_shapes = flag("record_shapes", record_shapes)  # before the device: a typo is not a GPU question
        self.device = _check_device(device)
        self._prof: Any = None
        self._trace: Trace | None = None

    @property
    def trace(self) -> Trace:
        """The captured trace (available once the ``with`` block has exited)."""
        if self._trace is None:
            state = "is still running" if self._prof is not None else "has not run"
            raise RuntimeError(f"the capture {state}; read .trace after the with block")
        return self._trace

    def __enter__(self) -> "Capture":
        import torch
        from torch.profiler import ProfilerActivity, profile

        if self._prof is not None or self._trace is not None:
            raise RuntimeError("a Capture can be used once; create a new one")
        activities = [ProfilerActivity.CPU]
        if self.device.startswith("cuda"):
            activities.append(ProfilerActivity.CUDA)
            synchronize_all(torch)  # earlier work on any GPU must not spill into the capture
        self._prof = profile(activities=activities, record_shapes=self.record_shapes)
        with quiet_kineto():  # kineto's "profiler_start" line is not the reader's business
            self._prof.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        import torch

        prof = self._prof
        try:
            if self.device.startswith("cuda"):
                synchronize_all(torch)  # let every kernel launched on any GPU finish, so it is recorded
        finally:
            with quiet_kineto():
                prof.__exit__(exc_type, exc, tb)
        if exc_type is not None:
            return None  # the body's exception propagates; there is no trace
        self._trace = _to_trace(prof, self.device)
        return None


def _to_trace(prof: Any, device: str) -> Trace:
    import torch

    fd, path = tempfile.mkstemp(prefix="d2l_async_capture_", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        trace = read_chrome_trace(path)
    finally:
        os.unlink(path)
    if device.startswith("cuda"):
        index = torch.device(device).index
        name = torch.cuda.get_device_name(index if index is not None else torch.cuda.current_device())
        return cuda_capture(trace, name).with_meta(torch_version=torch.__version__)
    meta = {"source": "cpu", "device": f"CPU ({platform.processor() or platform.machine()}), no GPU activity"}
    return trace.with_meta(**meta, virtual=False, torch_version=torch.__version__, path="")


def cuda_capture(trace: Trace, device_name: str) -> Trace:
    """What :func:`capture` makes of a CUDA profile read from its file: the capture's own final
    synchronize labelled, each wait labelled with its source (the reader already filed the copy
    waits), and the meta of a real GPU run on ``device_name``.

    Returns:
        A new trace with those labels and ``meta`` set to ``source="cuda"``, ``device=device_name``,
        ``virtual=False``, ``path=""``.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    return label_block_sources(label_final_sync(trace)).with_meta(source="cuda", device=device_name, virtual=False,
                                                                  path="")


def synchronize_all(torch: Any) -> list[int]:
    """Wait for every GPU this process has used (has a CUDA context on); returns their indices.

    ``torch.cuda.synchronize()`` waits for the current device only, so kernels queued on another GPU
    would end after the profiler stopped and be lost.  A GPU without a context has nothing queued, and
    synchronizing it would create one (hundreds of MB of its memory), so it is left alone.

    Returns:
        The indices of the GPUs synchronized, in order (every GPU when torch cannot tell which have a context);
        ``[]`` without CUDA.
    """
    having("torch", torch, ("cuda",), what="the torch module")
    if not torch.cuda.is_available():
        return []
    has_context = getattr(torch._C, "_cuda_hasPrimaryContext", None)
    used = [i for i in range(torch.cuda.device_count()) if has_context is None or has_context(i)]
    for i in used:
        torch.cuda.synchronize(i)
    return used


def blocking_copies(trace: Trace) -> Trace:
    """File each copy call whose copy lands in pageable host memory as a wait (``block``), not a launch.

    CUDA cannot copy asynchronously into memory it has not pinned: ``cudaMemcpyAsync`` to pageable
    memory returns only after every earlier kernel on the stream and the copy itself are done.  On the
    shipped A100 training step those calls held the CPU 758 ms, against 161 ms of the waits the file
    names as such.  :func:`~d2l_async.trace.read_chrome_trace` files them so for
    every profiler file it reads (a capture too); this is for traces that still call them launches, such
    as an export written by an older version.

    Returns:
        A new trace whose calls of those copies are ``block`` events with a reason; ``trace`` itself when it holds
        none.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    import numpy as np

    from ..trace import BLOCKING_COPIES

    c = trace.columns
    copies = np.flatnonzero((c["kind"] == Kind.COPY.value) & (c["flow"] >= 0))
    flows = {int(c["flow"][i]) for i in copies if str(c["name"][i]).endswith(BLOCKING_COPIES)}
    if not flows:
        return trace
    calls = np.flatnonzero((c["kind"] == Kind.LAUNCH.value) & np.isin(c["flow"], list(flows)))
    if not len(calls):
        return trace
    kind, reason = c["kind"].copy(), c["reason"].copy()
    kind[calls] = Kind.BLOCK.value
    reason[calls] = BLOCKING_COPY_REASON
    for col in (kind, reason):
        col.flags.writeable = False
    return Trace(trace.lanes, {**c, "kind": kind, "reason": reason}, trace.meta)


def label_block_sources(trace: Trace) -> Trace:
    """Give each wait without a source the outermost ATen op around it on its thread (``"aten::item"``).

    A CUDA capture knows no Python line, but it knows the op that called the synchronizing runtime call:
    ``aten::item`` for ``.item()`` and ``float()``, ``aten::_to_copy`` for ``.cpu()``, ``aten::is_nonzero``
    for a tensor in an ``if``.  The capture's own final synchronize keeps its label.

    Returns:
        A new trace with those ``source`` fields filled (a wait off the frontend lanes, or with no op around it,
        stays blank); ``trace`` itself when no wait lacks a source.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    import numpy as np

    c = trace.columns
    blocks = np.flatnonzero((c["kind"] == Kind.BLOCK.value) & (c["source"] == ""))
    if not len(blocks):
        return trace
    ops = np.flatnonzero(c["kind"] == Kind.OP.value)
    front = {lane.name for lane in trace.frontend_lanes}
    source = c["source"].copy()
    for i in blocks.tolist():
        if c["lane"][i] not in front:
            continue
        around = ops[(c["lane"][ops] == c["lane"][i]) & (c["start"][ops] <= c["start"][i])
                     & (c["end"][ops] >= c["end"][i])]
        if len(around):
            outer = around[np.argmin(c["start"][around] - c["end"][around])]  # the longest: the outermost
            source[i] = str(c["name"][outer])
    source.flags.writeable = False
    return Trace(trace.lanes, {**c, "source": source}, trace.meta)


#: the ``source`` given to the synchronization the capture itself adds before stopping
CAPTURE_SYNC_SOURCE = "d2l_async.capture: waits for the GPU so every kernel is recorded"


def label_final_sync(trace: Trace) -> Trace:
    """Mark the last ``cudaDeviceSynchronize`` as the capture's own, so a blocker report can tell
    it from the user's code (its ``source`` says so; the event and its time stay).

    Returns:
        A new trace whose last ``cudaDeviceSynchronize`` wait has the capture's source label; ``trace`` itself when
        it has none.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    import numpy as np

    c = trace.columns
    idx = np.flatnonzero((c["kind"] == Kind.BLOCK.value) & (c["name"] == "cudaDeviceSynchronize"))
    if not len(idx):
        return trace
    last = idx[np.argmax(c["start"][idx])]
    source = c["source"].copy()
    source[last] = CAPTURE_SYNC_SOURCE
    source.flags.writeable = False
    return Trace(trace.lanes, {**c, "source": source}, trace.meta)


def capture(fn: Callable[..., Any], *args: Any, device: str = "cuda", **kwargs: Any) -> Trace:
    """Run ``fn(*args, **kwargs)`` under ``torch.profiler`` and return what it did as a Trace.

    Args:
        fn: the work to profile (launch kernels, run a training step, ...).
        *args: positional arguments for ``fn``.
        device: ``"cuda"`` to record CPU and GPU activity, ``"cpu"`` for CPU activity only.
        **kwargs: keyword arguments for ``fn``.

    Returns:
        The trace: the Python thread(s) as frontend lanes and, with CUDA, one backend lane per
        stream, each kernel paired with its launch.  ``meta["source"]`` is ``"cuda"`` or ``"cpu"``
        and ``meta["device"]`` names the GPU (or says there was none).
    """
    if not callable(fn):
        raise TypeError(f"capture expects a callable, got {type(fn).__name__}")
    with Capture(device=device) as cap:
        fn(*args, **kwargs)
    return cap.trace
