"""Every public callable called with bad arguments, one argument at a time, each call under a deadline.

The public surface is what each public module lists in ``__all__`` (the package, its sub-packages and
their public modules, found by walking the package: nothing here names a callable to test).  Each
callable gets its required arguments from :data:`GOOD` (by parameter name) or, failing that, from its
annotation; then each parameter in turn is replaced by every value of :data:`BAD`.

An outcome is one of:

- ``ok``: the call returned (a returned context manager is entered and left, since ``with f(...)``
  is how a reader uses it, and that is where some of them start threads);
- ``clear``: a ``TypeError``/``ValueError`` or one of the package's own exceptions whose message names
  the argument and shows the value or what is accepted (or what to pass instead), in the package's own
  words: Python's or numpy's words from deep inside (:data:`PYTHON_WORDS`) are never clear, even from
  a function of one argument;
- ``unclear``: such an exception whose message does not (the reader cannot tell which argument);
- ``raw``: any other exception (``AttributeError``, ``KeyError``, ``IndexError``, ``ZeroDivisionError``,
  ``RecursionError``, ``OverflowError``, ...): the reader sees the package's insides, not their mistake;
- ``blocked``: refused, clearly, on another argument's stand-in value (not a judgement of this one): the
  message names that argument, or shows its stand-in (a path or a piece of source text) and not this one;
- ``hang``: no answer before the deadline (the worker process is killed and a fresh one continues);
- ``crash``: the worker process died.

The calls run in worker processes (``python -m tests.bad_input.surface SHARD SHARDS START FD``)
that report each outcome as one JSON line on a pipe, so a hang or a crash costs one case, not the run.
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import inspect
import json
import math
import os
import pkgutil
import re
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[2]

#: The bad values, by name.  A factory each, so no call sees a value another call changed.
BAD: dict[str, Callable[[], Any]] = {
    "object": object,
    "str": lambda: "not-a-valid-value",
    "none": lambda: None,
    "nan": lambda: math.nan,
    "inf": lambda: math.inf,
    "negative": lambda: -1,
    "zero": lambda: 0,
    "huge": lambda: 10**12,
    "empty_list": list,
    "empty_str": str,
}

#: Callables whose default arguments start an experiment, a dashboard's first run or worker
#: processes (seconds to minutes each).  They are called only with the values that must be refused
#: before any work starts: a wrong type, NaN and a negative number.  Matched against the public name.
LONG_RUNNING = re.compile(r"^(run_\w+|\w+_dashboard|launch|run_report|measure_scheduling_overhead|"
                          r"compare_sync_every|trace_explorer)$")
REFUSED_FIRST = ("object", "nan", "negative")

#: Exceptions whose classes say "you passed something wrong".  The package's own exception classes
#: (defined under ``d2l_async``) count too.
CLEAR_TYPES = (TypeError, ValueError)

#: Words that say what is accepted, when the message does not repeat the value itself.
ACCEPTED = re.compile(r"must|expect|one of|between|at most|at least|accept|use |should|only|>=|<=|"
                      r"positive|non-negative|integer|number|not allowed|cannot|can't|needs?|requires?|"
                      r"refus|invalid|unknown|no such|not a|not found|limit|maximum|minimum|\bpass\b|drop it", re.I)

#: Python's and numpy's own words from deep inside a function: they name no argument of the reader's
#: and say nothing of what to pass, whatever else the message happens to contain (the type's name, a
#: word that matches an argument).
PYTHON_WORDS = re.compile(
    r"object is not (iterable|callable|subscriptable)|not supported between instances of|unsupported operand "
    r"type|bad operand type for|unhashable type|has no len\(\)|could not convert string to float|cannot convert "
    r"float NaN to integer|cannot be interpreted as an integer|argument must be a string|expected str, bytes or "
    r"os\.PathLike|not enough values to unpack|too many values to unpack|operands could not be broadcast|"
    r"did not contain a loop with signature|can't multiply sequence by non-int|dictionary update sequence "
    r"element|only 0-dimensional arrays can be converted|no median for empty data|Invalid value of type "
    r"'builtins\.", re.I)

# The public modules whose ``__all__`` is the surface; the count floor keeps the walk from
# silently finding nothing.
MIN_MODULES = 30
MIN_CALLABLES = 200


#: Public modules that are not a reader's surface: ``engine.core`` is the interface a runtime built on
#: the engine subclasses (``torch_async``): its records (``Device``, ``Op``, ``Var``) and hooks are made and
#: called by the engine itself on every op, where a check per call would cost every op
#: (``tests/torch_async/test_imports.py`` holds that interface to its documented contract instead).
NOT_A_READERS_SURFACE = ("d2l_async.engine.core",)


def public_modules() -> list[str]:
    """The package and every module under it with no ``_private`` part in its dotted name (less
    :data:`NOT_A_READERS_SURFACE`)."""
    import d2l_async

    names = ["d2l_async"]
    for info in pkgutil.walk_packages(d2l_async.__path__, "d2l_async."):
        if info.name.endswith("__main__") or any(p.startswith("_") for p in info.name.split(".")[1:]) \
                or info.name in NOT_A_READERS_SURFACE:
            continue
        names.append(info.name)
    return sorted(names)


def public_callables() -> list[tuple[str, Callable[..., Any]]]:
    """``(qualified name, callable)`` for each distinct callable in a public ``__all__``.

    Exception classes are left out (raising them is their use); an object listed by two modules is
    tested once, under the first module that lists it (sorted, so the package before its parts).
    """
    out, seen = [], set()
    for mod_name in public_modules():
        mod = importlib.import_module(mod_name)
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or not callable(obj) or id(obj) in seen:
                continue
            if isinstance(obj, type) and issubclass(obj, BaseException):
                continue
            seen.add(id(obj))
            out.append((f"{mod_name}.{name}", obj))
    return out


# -- good values for the arguments that are not under test --------------------------------------

def _small_trace() -> Any:
    from d2l_async.trace import Event, Lane, LaneRole, Trace

    lanes = [Lane("frontend", LaneRole.FRONTEND),
             Lane("cpu:0 worker 0", LaneRole.BACKEND, device="cpu:0", virtual=True, stream=0)]
    ev = [Event("frontend", "launch", "push", 0.0, 2e-6, source="cell 1, line 1: a = b + 1"),
          Event("cpu:0 worker 0", "op", "add", 3e-6, 8e-6, issue=0.0, device="cpu:0", reads=("b",),
                writes=("a",), nbytes=8),
          Event("frontend", "block", "wait_to_read", 2e-6, 8e-6, reason="print", source="cell 1, line 2: print(a)")]
    return Trace.from_events(ev, lanes=lanes, meta={"source": "engine", "virtual": True})


def _good_by_name(name: str, trace: Any, tmp: Path) -> tuple[bool, Any]:
    table: dict[str, Callable[[], Any]] = {
        "trace": lambda: trace, "lane": lambda: "frontend", "lane_a": lambda: "frontend",
        "lane_b": lambda: "cpu:0 worker 0", "path": lambda: tmp / "trace.json", "folder": lambda: tmp / "ranks",
        "device": lambda: "cpu", "backend": lambda: "engine", "expression": lambda: "x * y + 2",
        "expr": lambda: "x * y + 2", "text": lambda: "a line of text", "name": lambda: "cpu_only",
        "description": lambda: "x", "fn": lambda: (lambda *a, **k: None), "mode": lambda: "static",
        "value": lambda: 1, "min": lambda: 0, "max": lambda: 10, "size": lambda: 4, "n": lambda: 4,
        "workers": lambda: 1, "rows": lambda: [], "key": lambda: "asynchrony_ratio", "t": lambda: 0.0,
        "times": lambda: __import__("numpy").array([0.0, 1e-6]), "reason": lambda: "print",
        "source": lambda: "cell 1, line 2: print(a)", "kind": lambda: "op", "unit": lambda: "ms",
        "span_seconds": lambda: 1e-3, "i": lambda: 0, "line": lambda: "✔ a check", "holds": lambda: True,
        "shown": lambda: "shown", "needed": lambda: 1, "need": lambda: 1, "what": lambda: "x",
        "options": lambda: ["a", "b"], "samples": lambda: [], "checks": lambda: [], "outputs": lambda: [],
        "data": lambda: {}, "traces": lambda: {0: trace}, "torch": lambda: __import__("torch"),
        "mask": lambda: __import__("numpy").ones(3, dtype=bool), "pid": lambda: os.getpid(),
        "module": lambda: __import__("torch").nn.Linear(2, 2), "s": lambda: 1e-3, "window": lambda: (0.0, 1e-5),
        "title": lambda: "t", "banner": lambda: "b", "sections": lambda: [], "statistics": lambda: (lambda: None),
        "on_tick": lambda: (lambda samples: None), "n_ops": lambda: 10, "live_tensors": lambda: 2,
        "ops": lambda: 4, "full": lambda: 4, "quick": lambda: 2, "label": lambda: "x", "width": lambda: 400.0,
        "fig": lambda: __import__("plotly.graph_objects", fromlist=["Figure"]).Figure(),
        "figure": lambda: __import__("plotly.graph_objects", fromlist=["Figure"]).Figure(),
        "flops": lambda: (lambda *a: 1.0), "until": lambda: None, "device_name": lambda: "cpu",
        "experiment": lambda: (lambda **k: None), "controls": lambda: {},
        "graph": lambda: importlib.import_module("d2l_async.viz").expression_graph("x * y + 2"),
        "measurements": lambda: {"a": importlib.import_module("d2l_async.benchmark").Measurement((1e-3, 2e-3))},
        "ready_s": lambda: [0.0, 1e-3], "nbytes": lambda: [8, 8], "bucket_bytes": lambda: 16.0,
        "end_s": lambda: 2e-3, "link": lambda: importlib.import_module("d2l_async.experiments.modelled_link").LinkModel(),
    }
    if name in table:
        return True, table[name]()
    return False, None


def _good_by_annotation(annotation: Any, trace: Any) -> Any:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    text = text.strip("'\"")
    if "Trace" in text:
        return trace
    for prefix, value in (("bool", True), ("int", 1), ("float", 1.0), ("str", "x"), ("tuple[float", (1.0,)),
                          ("tuple[int", (1,)), ("tuple[str", ("x",)), ("tuple", ()), ("list", []),
                          ("dict", {}), ("Mapping", {}), ("Sequence", ()), ("Iterable", ()),
                          ("Callable", lambda *a, **k: None)):
        if text.startswith(prefix):
            return value
    return 1


@dataclass(frozen=True)
class Case:
    callable: str
    param: str
    bad: str


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _params(sig: inspect.Signature) -> list[inspect.Parameter]:
    return [p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _is_enum(fn: Any) -> bool:
    return isinstance(fn, type) and issubclass(fn, enum.Enum)


def cases(surface: list[tuple[str, Callable[..., Any]]]) -> list[Case]:
    """Every (callable, parameter, bad value) in a fixed order.

    An Enum is called as a lookup, ``Kind(value)``, only: its other parameters are Python's functional
    API for making new enums, not something a reader passes.
    """
    out = []
    for qual, fn in surface:
        sig = _signature(fn)
        if sig is None:
            continue
        bad = REFUSED_FIRST if LONG_RUNNING.match(qual.rsplit(".", 1)[1]) else tuple(BAD)
        for p in _params(sig):
            if _is_enum(fn) and p.name != "value":
                continue
            out.extend(Case(qual, p.name, b) for b in bad)
    return out


def _call(fn: Callable[..., Any], sig: inspect.Signature, param: str, value: Any, trace: Any, tmp: Path,
          stand_ins: list[Any] | None = None) -> Any:
    """Call ``fn`` with ``value`` for ``param`` and stand-ins for its other required parameters (appended
    to ``stand_ins`` when given, for :func:`classify`)."""
    args, kwargs = [], {}
    for p in _params(sig):
        if p.name == param:
            v = value
        elif p.default is not p.empty:
            continue
        else:
            known, v = _good_by_name(p.name, trace, tmp)
            if not known:
                v = _good_by_annotation(p.annotation, trace)
            if stand_ins is not None:
                stand_ins.append(v)
        if p.kind == p.POSITIONAL_ONLY:
            args.append(v)
        else:
            kwargs[p.name] = v
    result = fn(value) if _is_enum(fn) else fn(*args, **kwargs)
    if hasattr(result, "__enter__") and hasattr(result, "__exit__") and not isinstance(result, type):
        with result:
            pass
    return result


def _names(message: str, param: str) -> bool:
    if not param:  # the only argument: any message is about it
        return True
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(param)}(?![A-Za-z0-9_])", message) is not None


def _shows(message: str, bad: str, value: Any) -> bool:
    shown = {repr(value), str(value), type(value).__name__}
    if bad == "huge":
        shown |= {"1e+12", "1e12", "10**12", "1,000,000,000,000"}
    if bad == "empty_str":
        shown = {"''", '""', "empty"}
    if bad == "empty_list":
        shown |= {"empty", "()"}
    return any(s and s in message for s in shown) or ACCEPTED.search(message) is not None


def _shows_stand_in(message: str, stand_ins: tuple[Any, ...]) -> bool:
    """Whether the message quotes another argument's stand-in: a path or a text of 4+ characters."""
    for v in stand_ins:
        text = os.fspath(v) if isinstance(v, (str, os.PathLike)) else getattr(v, "__qualname__", None)
        if isinstance(text, str) and len(text) >= 4 and text in message:
            return True
    return False


def classify(exc: BaseException | None, param: str, bad: str, value: Any, *, others: tuple[str, ...] = (),
             aliases: tuple[str, ...] = (), stand_ins: tuple[Any, ...] = ()) -> tuple[str, str]:
    """``(outcome, detail)`` of one call; see the module docstring for the outcomes.

    ``others``: the call's other parameters that got a stand-in value; an error that names one of
    them and not ``param`` judged the stand-in, not the bad value (outcome ``blocked``, not counted).
    ``aliases``: other words that name the argument (an Enum's class name for ``Kind(value)``).
    ``stand_ins``: the values those other parameters got; a message that quotes one (a path, a text)
    and does not name ``param`` judged the stand-in too (``blocked``).
    A ``RuntimeError`` raised by the package's own code (its last frame under ``d2l_async/``) that names
    the argument is a state error said clearly (``make_async(runtime=None)`` outside a block).
    """
    if exc is None:
        return "ok", ""
    kind = type(exc).__name__
    message = str(exc)
    detail = f"{kind}: {message[:200]}"
    own = type(exc).__module__.startswith("d2l_async")
    names = any(_names(message, n) for n in (param, *aliases))
    if isinstance(exc, CLEAR_TYPES) or own or (type(exc) is RuntimeError and _raised_by_package(exc)):
        python_words = PYTHON_WORDS.search(message) is not None
        if names and _shows(message, bad, value) and not python_words:
            return "clear", detail
        named_here = any(_names(message, n) for n in (param, *aliases) if n)
        if not named_here and (any(_names(message, o) for o in others) or _shows_stand_in(message, stand_ins)):
            return "blocked", detail
        return ("unclear" if not type(exc) is RuntimeError else "raw"), detail
    return "raw", detail


def _raised_by_package(exc: BaseException) -> bool:
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and f"{os.sep}d2l_async{os.sep}" in last


# -- the worker ----------------------------------------------------------------------------------

def _shard(all_cases: list[Case], shard: int, shards: int) -> list[Case]:
    # whole callables per shard, so one callable's cases share a worker's warm state
    names = sorted({c.callable for c in all_cases})
    mine = {n for i, n in enumerate(names) if i % shards == shard}
    return [c for c in all_cases if c.callable in mine]


def worker(shard: int, shards: int, start: int, fd: int) -> None:
    """Run this shard's cases from ``start`` on, writing ``{"i", "outcome", "detail"}`` lines to ``fd``."""
    import warnings

    warnings.simplefilter("ignore")
    out = os.fdopen(fd, "w", buffering=1)
    surface = dict(public_callables())
    mine = _shard(cases(list(surface.items())), shard, shards)
    trace = _small_trace()
    tmp = Path(tempfile.mkdtemp(prefix="d2l-bad-input-"))
    os.chdir(tmp)
    for i in range(start, len(mine)):
        c = mine[i]
        out.write(json.dumps({"i": i, "start": True}) + "\n")
        fn = surface[c.callable]
        sig = _signature(fn)
        value = BAD[c.bad]()
        exc: BaseException | None = None
        stand_ins: list[Any] = []
        try:
            _call(fn, sig, c.param, value, trace, tmp, stand_ins)
        except (KeyboardInterrupt, SystemExit) as e:  # a public function must not end the kernel either
            exc = e
        except BaseException as e:  # noqa: BLE001 - every exception is an outcome to classify
            exc = e
        params = _params(sig)
        others = tuple(p.name for p in params if p.name != c.param)
        # "split_ranks expects a Trace, got str" names its subject, the first argument; with one
        # argument there is nothing else the message could be about
        first = bool(params) and params[0].name == c.param
        aliases = (fn.__name__,) if _is_enum(fn) or first else ()
        if len(params) == 1 or (_is_enum(fn)):
            aliases += ("",)
        outcome, detail = classify(exc, c.param, c.bad, value, others=others, aliases=aliases,
                                   stand_ins=tuple(stand_ins))
        out.write(json.dumps({"i": i, "outcome": outcome, "detail": detail}) + "\n")
    out.write(json.dumps({"end": True}) + "\n")


@dataclass(frozen=True)
class Result:
    case: Case
    outcome: str
    detail: str


def _read_line(fd: int, buf: bytearray, deadline: float) -> str | None:
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return ""  # the worker is gone
        buf.extend(chunk)
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line.decode()


@contextlib.contextmanager
def _worker_process(shard: int, shards: int, start: int) -> Iterator[tuple[subprocess.Popen, int]]:
    r, w = os.pipe()
    env = {**os.environ, "D2L_ASYNC_QUICK": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.bad_input.surface", str(shard), str(shards), str(start),
                             str(w)], cwd=ROOT, env=env, pass_fds=(w,), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    os.close(w)
    try:
        yield proc, r
    finally:
        os.close(r)
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait(timeout=30)


def run_shard(shard: int, shards: int, *, timeout_s: float, startup_s: float = 120.0) -> list[Result]:
    """This shard's outcomes; a case with no answer in ``timeout_s`` is a hang, a dead worker a crash."""
    surface = public_callables()
    mine = _shard(cases(surface), shard, shards)
    results: list[Result] = []
    i = 0
    while i < len(mine):
        with _worker_process(shard, shards, i) as (proc, fd):
            buf = bytearray()
            deadline = time.monotonic() + startup_s
            running = None
            while True:
                line = _read_line(fd, buf, deadline)
                if line is None or line == "":
                    c = mine[running] if running is not None else mine[i]
                    outcome = "hang" if line is None else "crash"
                    detail = (f"no answer in {timeout_s:g} s" if running is not None else "worker did not start")
                    if line == "":
                        detail = f"worker exited with {proc.wait(timeout=30)}"
                    results.append(Result(c, outcome, detail))
                    i = (running if running is not None else i) + 1
                    break
                msg = json.loads(line)
                if msg.get("end"):
                    return results
                if msg.get("start"):
                    running = msg["i"]
                    deadline = time.monotonic() + timeout_s
                    continue
                results.append(Result(mine[msg["i"]], msg["outcome"], msg["detail"]))
                i = msg["i"] + 1
                running = None
                deadline = time.monotonic() + timeout_s
    return results


def run_all(*, shards: int = 2, timeout_s: float = 20.0) -> list[Result]:
    """Every shard at once, in threads (the work is in the worker processes)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(shards) as pool:
        parts = list(pool.map(lambda s: run_shard(s, shards, timeout_s=timeout_s), range(shards)))
    return [r for part in parts for r in part]


def summary(results: list[Result]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    raw_kinds: dict[str, int] = {}
    for r in results:
        if r.outcome == "raw":
            k = r.detail.split(":", 1)[0]
            raw_kinds[k] = raw_kinds.get(k, 0) + 1
    return {"calls": len(results), "callables": len({r.case.callable for r in results}), "outcomes": counts,
            "raw_kinds": raw_kinds}


if __name__ == "__main__":
    if len(sys.argv) == 5:
        worker(*map(int, sys.argv[1:]))
    else:  # python -m tests.bad_input.surface  -> the whole sweep, a summary and every failure
        t0 = time.monotonic()
        res = run_all()
        print(json.dumps(summary(res), indent=1))
        for r in res:
            if r.outcome not in ("ok", "clear", "blocked"):
                print(f"{r.outcome:8} {r.case.callable}({r.case.param}={r.case.bad}) {r.detail}")
        print(f"{time.monotonic() - t0:.0f} s")
