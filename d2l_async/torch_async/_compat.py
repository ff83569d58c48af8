"""Which torch this runs on: the version floor, then the private APIs, checked before either is used.

Running unmodified torch code asynchronously takes torch extension points that its stability
promise does not cover: ``torch.Tensor._make_wrapper_subclass`` (a tensor with metadata and no
storage), ``TorchDispatchMode`` (catch every op, factories included), operator tags (which ops
draw random numbers, change metadata in place, have data-dependent shapes) and the dispatcher's
thread-local key sets (:mod:`._state`).  :func:`check_torch` runs when ``d2l_async.torch_async``
is imported, *before* any module of it touches a private API: an older torch gets
:class:`UnsupportedTorchError` naming the versions that work, not an ``AttributeError`` from
deep inside an import (torch 2.1.2 failed with "module 'torch._C' has no attribute
'TensorBase'"; 2.2.2 got past the old guard and broke at the first tensor).

The one source of truth for versions: :data:`MIN_VERSION` (the floor that pyproject.toml,
binder/ and the README repeat, checked by tests/test_install_files.py) and
:data:`TESTED_VERSIONS` (what the test suite ran on).
"""

from __future__ import annotations

import re

import torch

from ..engine import EngineError

__all__ = ["UnsupportedTorchError", "check_torch", "TESTED_VERSIONS", "MIN_VERSION", "PRIVATE_APIS"]

#: torch versions that tests/torch_async passed on with this code, each in its own venv (the version
#: matrix, benchmarks/results/torch_versions.json, with tests/engine and tests/experiments beside it):
#: the floor, a Colab-like one (Python 3.12), the pinned CPU build (``make``, Binder) and the newest two
#: on PyPI.  On 2.3 and 2.9 one gradient is not bitwise eager's (cumprod: torch's own subclass branch,
#: tests/torch_async/test_opinfo.py).
TESTED_VERSIONS = ("2.3.1", "2.9.1", "2.13.0", "2.14.1", "2.15.0")
#: The oldest torch that passes: 2.3 (measured in the version matrix; 2.2.2 passed the API check below and
#: then failed at the first tensor, and crashed in index_add_).
MIN_VERSION = (2, 3)
#: The private APIs used, as ``(owner path, attribute)`` (checked by :func:`check_torch`).
PRIVATE_APIS = (("torch.Tensor", "_make_wrapper_subclass"), ("torch._C", "TensorBase"),
                ("torch._C", "_ForceDispatchKeyGuard"), ("torch._C", "_dispatch_tls_local_include_set"),
                ("torch._C", "_dispatch_tls_local_exclude_set"), ("torch._C", "_set_conj"),
                ("torch._C", "_set_neg"), ("torch._C", "_set_grad_enabled"), ("torch._C", "DispatchKeySet"))


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
    version = getattr(torch, "__version__", "unknown")
    if _version(version) < MIN_VERSION:
        raise UnsupportedTorchError(
            f"d2l_async.asynchronous needs torch >= {MIN_VERSION[0]}.{MIN_VERSION[1]} "
            f"(tested with {', '.join(TESTED_VERSIONS)}); this is torch {version}. "
            "Upgrade torch, or use the engine (d2l_async.engine.ThreadedEngine), which works on any torch.")
    missing = []
    for owner, name in PRIVATE_APIS:
        obj = torch
        for part in owner.split(".")[1:]:
            obj = getattr(obj, part, None)
        if not hasattr(obj, name):
            missing.append(f"{owner}.{name}")
    try:
        from torch.utils._python_dispatch import TorchDispatchMode  # noqa: F401
    except ImportError:
        missing.append("torch.utils._python_dispatch.TorchDispatchMode")
    for tag in ("nondeterministic_seeded", "inplace_view", "dynamic_output_shape", "data_dependent_output"):
        if not hasattr(getattr(torch, "Tag", None), tag):
            missing.append(f"torch.Tag.{tag}")
    try:
        torch.ops.aten.add.Tensor._schema  # noqa: B018 - does the attribute exist
    except Exception:  # noqa: BLE001 - any failure means it is not there
        missing.append("OpOverload._schema")
    if missing:
        raise UnsupportedTorchError(
            f"torch {version} lacks {', '.join(missing)}, which d2l_async.asynchronous needs "
            f"(tested with torch {', '.join(TESTED_VERSIONS)}). Use the pinned torch, or the engine "
            "(d2l_async.engine.ThreadedEngine), which works on any torch.")
    _CHECKED.append(True)
