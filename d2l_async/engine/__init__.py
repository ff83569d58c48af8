"""An asynchronous dependency engine on CPU threads: MXNet's semantics, made observable.

PyTorch runs CPU ops synchronously, so on a laptop nothing in the chapter on asynchronous
computation (D2L §13.2) would be asynchronous.  This engine makes it real::

    with ThreadedEngine(workers=2, devices=("cpu:0", "cpu:1")) as eng:
        x = eng.array(torch.ones(2, 2), name="x")
        z = x * x + 2          # pushed: returns at once, a worker computes it
        x += 1                 # a write to x: waits until the read of x above has run
        print(z)               # a blocker: waits for z's value
        eng.waitall()          # a barrier: waits for everything
        eng.trace()            # what happened, as a d2l_async.trace.Trace

Where to read on:

* :mod:`.minimal` -- start here: the whole idea in one file (vars, ops, workers, blockers, deferred
  errors), without the concerns below; :mod:`.exercise` grades a student's own ``push``/``finish``;
* :mod:`._deps` -- the dependency rules (reads overlap, writes wait), as pure functions;
* :mod:`._scheduler` -- the state machine of an op, queues and workers (the lecture);
* :mod:`._waits`, :mod:`._shutdown`, :mod:`._guard`, :mod:`._worker` -- blockers and barriers,
  cancelling, and what keeps a student from wedging the engine (waits inside an op, dropped engines);
* :mod:`._shield` -- a Ctrl-C never lands half-way through the bookkeeping (naive engine);
* :mod:`._array` -- ``EngineArray``, the handle arithmetic builds ops from;
* :mod:`._engine` -- ``ThreadedEngine`` and its synchronous twin ``NaiveEngine``;
* :mod:`._observer` -- the observer protocol and the recorder that makes traces;
* :mod:`.core` -- the interface a runtime built on the engine uses (``torch_async``): the records,
  the rules, and the scheduler with its documented subclass hooks;
* :mod:`._modelled` -- modelled-time devices (``model=DeviceModel()``): real values, modelled durations;
* :mod:`._overhead` -- how scheduling cost grows with the number of workers.

``workers`` counts threads **per virtual device**.  Virtual devices are threads on this CPU, never
GPUs; traces say so (``Lane.virtual``, ``meta["virtual"]``).  The core (``_deps``,
``_scheduler``) uses only the standard library; this package imports torch but neither plotly nor
ipywidgets.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._default import get_engine, waitall_all
from ._errors import EngineError
from ._modelled import MODELLED_LABEL
from ._op import EngineStatistics, OpState
from ._scheduler import live_engines
from ._waits import wait_limit

# torch (and the trace model's numpy) load on first use of these names, so the core
# (``_deps``, ``_op``, ``_scheduler``) can be imported, and tested, with the standard library alone
_LAZY = {
    "EngineArray": "._array",
    "DeviceModel": "._modelled",  # modelled-time devices (._modelled)
    "with_flops": "._modelled",
    "make_engine": "._engine",
    "NaiveEngine": "._engine",
    "ThreadedEngine": "._engine",
    "Recorder": "._observer",
    "SchedulingOverhead": "._overhead",
    "measure_scheduling_overhead": "._overhead",
}

__all__ = [
    "DeviceModel",
    "EngineArray",
    "EngineError",
    "EngineStatistics",
    "MODELLED_LABEL",
    "NaiveEngine",
    "OpState",
    "Recorder",
    "SchedulingOverhead",
    "ThreadedEngine",
    "get_engine",
    "live_engines",
    "make_engine",
    "measure_scheduling_overhead",
    "wait_limit",
    "waitall_all",
    "with_flops",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
