"""``os.fork`` while a block is open: ``DataLoader(num_workers=N)``'s workers.

A fork copies only the thread that forks: the block's worker threads are not in the child, so an
op it queued would wait forever (every op of a DataLoader worker: no batch ever came, and the
worker, stuck, outlived its parent).  The hooks below are registered when this package is imported.
"""

from __future__ import annotations

import os

import torch
from torch.utils._python_dispatch import _pop_mode, _push_mode

from ._mode import _AsyncMode, _local
from ._runtime import live_runtimes

__all__: list[str] = []

#: the parent's open blocks at the fork, kept for the child's hook: the engine's own hook
#: (``d2l_async.engine._fork``, registered first, so run first in the child) empties the list of
#: live engines before this module's runs
_forking: list = []

def _before_fork() -> None:
    """In the parent, before ``os.fork`` (``DataLoader(num_workers=N)``'s workers): every queued op
    runs first.  The child then finds the workers idle (no lock of theirs held across the fork) and
    every asynchronous tensor computed -- a dataset made inside the block is readable there."""
    _forking[:] = [rt for rt in live_runtimes() if not rt.closed]
    for rt in _forking:
        rt.drain("fork (DataLoader workers)")


def _after_fork_in_child() -> None:
    """In the child: no worker thread came along, so no block can run an op.  Its blocks are closed
    (ops on their tensors run eagerly, on the data the parent computed) and this thread's dispatch
    modes of ours are removed -- before, every op of a DataLoader worker was queued for a thread
    that did not exist: no batch ever came, and the worker outlived its parent.  Nothing here takes
    a lock: a parent's thread may have held one at the fork."""
    for rt in _forking:
        rt.closed = True
    _forking.clear()
    _local.__dict__.pop("stack", None)
    kept = []
    while torch._C._len_torch_dispatch_stack() > 0:
        mode = _pop_mode()
        if not isinstance(mode, _AsyncMode):
            kept.append(mode)
    for mode in reversed(kept):
        _push_mode(mode)


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child, after_in_parent=_forking.clear)
