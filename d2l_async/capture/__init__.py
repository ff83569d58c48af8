"""Live capture of real work with ``torch.profiler``: :func:`capture` and :class:`Capture`; and of JAX
work with ``jax.profiler``: :func:`jax_capture` (``_jax.py``, JAX optional: ``d2l-async[jax]``).

torch and JAX are imported only when a capture starts.
"""

from __future__ import annotations

from ._profiler import (BLOCKING_COPY_REASON, CAPTURE_SYNC_SOURCE, Capture, blocking_copies, capture, cuda_capture,
                        label_block_sources, label_final_sync, synchronize_all)
from ._jax import (JAX_INSTALL, JaxMissing, have_jax, import_jax, jax_capture, jax_cpu_devices, jax_label, jax_wait,
                   jax_waitall)
from ._quiet import quiet_kineto

__all__ = ["BLOCKING_COPY_REASON", "CAPTURE_SYNC_SOURCE", "Capture", "JAX_INSTALL", "JaxMissing", "blocking_copies",
           "capture", "cuda_capture", "have_jax", "import_jax", "jax_capture", "jax_cpu_devices", "jax_label",
           "jax_wait", "jax_waitall", "label_block_sources", "label_final_sync", "quiet_kineto", "synchronize_all"]
