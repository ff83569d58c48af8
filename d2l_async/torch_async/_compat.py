"""Which torch this runs on: the private APIs plain-torch asynchrony needs, checked once.

Running unmodified torch code asynchronously takes three of torch's extension points that are not
covered by its stability promise: ``torch.Tensor._make_wrapper_subclass`` (a tensor with metadata
and no storage), ``TorchDispatchMode`` (catch every op, factories included) and operator tags
(which ops draw random numbers, which change metadata in place, which have data-dependent
shapes).  They exist since torch 2.1 and were tested here with the pinned 2.13.  Anything missing
fails at the first ``asynchronous()`` with :class:`UnsupportedTorchError`, which names the version
and the API, instead of crashing somewhere inside an op.
"""

from __future__ import annotations

import re

import torch

from ..engine import EngineError

__all__ = ["UnsupportedTorchError", "check_torch", "TESTED_VERSIONS", "MIN_VERSION"]

#: Versions this package's tests ran on (the project pins 2.13; others are untested).
TESTED_VERSIONS = ("2.13",)
#: The oldest torch with every API below (tags on OpOverload, wrapper subclasses with
#: ``dispatch_sizes_strides_policy``, the dispatch-mode stack).
MIN_VERSION = (2, 1)


class UnsupportedTorchError(EngineError):
    """This torch lacks an API that plain-torch asynchrony needs (see :func:`check_torch`)."""


def _version(v: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", v)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


_CHECKED: list[bool] = []


def check_torch() -> None:
    """Raise :class:`UnsupportedTorchError` unless this torch has what the package needs."""
    if _CHECKED:
        return
    version = torch.__version__
    if _version(version) < MIN_VERSION:
        raise UnsupportedTorchError(
            f"d2l_async.asynchronous needs torch >= {MIN_VERSION[0]}.{MIN_VERSION[1]} "
            f"(tested with {', '.join(TESTED_VERSIONS)}); this is torch {version}. "
            "Upgrade torch, or use the engine (d2l_async.engine.ThreadedEngine), which works on any torch.")
    missing = []
    if not hasattr(torch.Tensor, "_make_wrapper_subclass"):
        missing.append("torch.Tensor._make_wrapper_subclass")
    try:
        from torch.utils._python_dispatch import TorchDispatchMode  # noqa: F401
    except ImportError:
        missing.append("torch.utils._python_dispatch.TorchDispatchMode")
    for tag in ("nondeterministic_seeded", "inplace_view", "dynamic_output_shape", "data_dependent_output"):
        if not hasattr(torch.Tag, tag):
            missing.append(f"torch.Tag.{tag}")
    if not hasattr(torch.ops.aten.add.Tensor, "_schema"):
        missing.append("OpOverload._schema")
    if missing:
        raise UnsupportedTorchError(
            f"torch {version} lacks {', '.join(missing)}, which d2l_async.asynchronous needs "
            f"(tested with torch {', '.join(TESTED_VERSIONS)}). Use the pinned torch, or the engine "
            "(d2l_async.engine.ThreadedEngine), which works on any torch.")
    _CHECKED.append(True)
