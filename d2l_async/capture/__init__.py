"""Live capture of real work with ``torch.profiler``: :func:`capture` and :class:`Capture`.

torch is imported only when a capture starts.
"""

from __future__ import annotations

from ._profiler import Capture, capture

__all__ = ["Capture", "capture"]
