"""Older objects out of the cycle collector's full collections while the frontend runs ahead.

A frontend that runs ahead keeps its queued ops (and their arrays or tensors) alive past two young
collections, so they pile up in the oldest generation; past a quarter of its size Python runs a
*full* collection, which walks every object of the process: 286,000 after ``import torch``, about
110--180 ms each.  Plain torch in ``asynchronous()`` paid one every ~18,000 queued ops, 9 us of
each ``y = x + 1``; the engine's own ``y = x + 1`` one every ~40,000, 3--5 us of each
(a 2 us push took 7 us).

So while an engine's ``with`` block or an ``asynchronous()`` block is open (:func:`hold` /
:func:`release`, counted: the first hold freezes, the last release gives back), the objects that
existed before are left out of full collections (``gc.freeze``): a full collection walks only what
the blocks made.  Nothing is lost: cycles among the frozen objects are collected after the last
block.  The rules:

* a process that froze objects itself after importing d2l_async (the freeze count above
  :data:`_baseline`) is left as it is, and so is a process with the collector disabled;
* Python has no partial ``unfreeze``: the last release gives back what was frozen before the
  import too (on 3.12, its 375 startup tuples; the first rule was "nothing frozen yet", which
  never held on 3.12, as on Colab, so nothing was ever frozen there).
"""

from __future__ import annotations

import gc
import threading

__all__ = ["hold", "release"]

_lock = threading.Lock()
_holders = [0]
_froze = [False]
#: What the permanent generation held when this module was imported: the interpreter's own (Python
#: 3.12 starts with 375 static tuples there; 3.11 and 3.13 with none), or what a process froze before
#: importing d2l_async.  More than that at the first hold: the process froze objects since, itself
#: (fewer: some frozen objects were freed).
_baseline = [gc.get_freeze_count()]


def hold() -> None:
    """A block opens: the first one freezes the objects that exist now (see the module)."""
    with _lock:
        _holders[0] += 1
        if _holders[0] == 1 and gc.isenabled() and gc.get_freeze_count() <= _baseline[0]:
            gc.freeze()  # it only falls, unless someone freezes
            _froze[0] = True


def release() -> None:
    """A block closes: the last one gives the frozen objects back to the collector."""
    with _lock:
        _holders[0] = max(_holders[0] - 1, 0)
        if _holders[0] == 0 and _froze[0]:
            _froze[0] = False
            gc.unfreeze()
            _baseline[0] = gc.get_freeze_count()  # 0: the permanent generation is empty now
