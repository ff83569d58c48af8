"""d2l_async: D2L's asynchronous computation chapter, made visible.

The package follows the chapter's data flow, one sub-package per step::

    experiments  ->  engine | capture  ->  trace  ->  analysis  ->  viz  ->  widgets  ->  notebooks

Heavy parts (torch, plotly, ipywidgets) are imported lazily: ``import d2l_async`` and
``import d2l_async.trace`` stay light so traces can be analysed on any machine.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (imported on first access)
_LAZY = {
    "Benchmark": "d2l_async.benchmark",
    "Measurement": "d2l_async.benchmark",
    "measure": "d2l_async.benchmark",
    "try_gpu": "d2l_async.devices",
    "try_all_gpus": "d2l_async.devices",
    "num_gpus": "d2l_async.devices",
    "describe_machine": "d2l_async.devices",
    "quick_mode": "d2l_async.config",
    "Trace": "d2l_async.trace",
    "ThreadedEngine": "d2l_async.engine",
    "NaiveEngine": "d2l_async.engine",
    "asynchronous": "d2l_async.torch_async",
    "synchronize": "d2l_async.torch_async",
}
_SUBMODULES = {"analysis", "benchmark", "capture", "claims", "config", "data", "devices", "distributed", "engine", "experiments",
               "lesson", "report", "torch_async", "trace", "verdict", "viz", "widgets"}

__all__ = sorted([*_LAZY, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"d2l_async.{name}")
    raise AttributeError(f"module 'd2l_async' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)
