"""Live capture of real work with ``torch.profiler``: :func:`capture` and :class:`Capture`.

torch is imported only when a capture starts.
"""

from __future__ import annotations

from ._profiler import CAPTURE_SYNC_SOURCE, Capture, capture, label_final_sync

__all__ = ["CAPTURE_SYNC_SOURCE", "Capture", "capture", "label_final_sync"]
