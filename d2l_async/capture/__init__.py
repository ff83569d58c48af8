"""Live capture of real work with ``torch.profiler``: :func:`capture` and :class:`Capture`.

torch is imported only when a capture starts.
"""

from __future__ import annotations

from ._profiler import (BLOCKING_COPY_REASON, CAPTURE_SYNC_SOURCE, Capture, blocking_copies, capture, cuda_capture,
                        label_block_sources, label_final_sync, synchronize_all)
from ._quiet import quiet_kineto

__all__ = ["BLOCKING_COPY_REASON", "CAPTURE_SYNC_SOURCE", "Capture", "blocking_copies", "capture", "cuda_capture",
           "label_block_sources", "label_final_sync", "quiet_kineto", "synchronize_all"]
