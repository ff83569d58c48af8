"""jax.profiler traces of JAX's CPU backend, read as lanes and events of the one trace model.

``jax.profiler.trace(log_dir, create_perfetto_trace=True)`` writes a Chrome-format JSON file
(``plugins/profile/<run>/perfetto_trace.json.gz``, and ``<host>.trace.json.gz`` beside it) unlike
torch's: its slices have no ``cat`` and no flow arrows.  What it holds, and what this reader makes of
it (verified with jax 0.10.2 on Linux)::

    process "/host:CPU"
      thread "python"  (each thread that dispatches)          -> frontend lane "python"
        PjitFunction(dot)                                     -> Kind.OP: the jitted function called
        CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice -> Kind.LAUNCH: one execution enqueued
        DevicePut, lower_sharding_computation, backend_compile_and_load -> Kind.RUNTIME
        d2l_async.wait (a TraceAnnotation, :data:`JAX_WAIT`)  -> Kind.BLOCK, reason/source from its args
        np.asarray(jax.Array)                                 -> Kind.BLOCK, reason "np.asarray"
        CommonPjRtBuffer::Await, Await                        -> Kind.BLOCK, reason "await" (the thread
                                                                 waited from the first to the second)
      threads "tf_XLAPjRtCpuClient/..." (and the thunks they hand to "tf_XLAEigen/...")
        ynn_fusion {run_id, hlo_module: jit_dot, device_ordinal: 0}, ...
                                                              -> one Kind.OP per execution (all slices
                                                                 of one run_id) on lane "cpu:0 (XLA)"

**Which dispatch ran which execution.**  An execution's slices carry ``run_id`` (an id the runtime
gives each launch of a compiled program), ``device_ordinal`` and ``hlo_module`` (``jit_`` and the
function's name); a dispatch carries nothing, but lies inside the ``PjitFunction(<name>)`` of the
function it runs.  Each device runs its executions one at a time, in the order they were dispatched
(measured: a hundred independent products never overlapped), so the dispatches are walked in time
order and each takes the next execution of a device whose next one has its function's name: where
two devices qualify, the one whose execution starts where it would if dispatched then (at once on
an idle device, when the previous one ends on a busy one).  Both get one ``flow`` id; the
execution's ``issue`` is the dispatch's start.  Executions that began before any dispatch could have
sent them were dispatched before the recording started; they, and dispatches whose execution the
recording missed, are counted in ``meta["unmatched_executions"]`` and ``meta["unmatched_launches"]``.

**Inline executions.**  XLA's CPU client runs a program of under 1000 flops (``y = x + 1`` on a few
elements) on the calling thread, inside the dispatch, instead of queueing it: a context switch would
cost more than the work.  Such an execution sits on the device's lane like any other, inside its
dispatch; ``meta["inline_executions"]`` counts them.  A run of them is synchronous in fact.

**Waits.**  The trace records few waits itself: ``np.asarray(jax.Array)`` spans (``print``,
``float`` and ``np.asarray`` convert through it) and pairs of ``CommonPjRtBuffer::Await`` slices,
between which the thread waited (``block_until_ready``); ``.item()`` leaves no slice at all.  Code
that wants its waits named wraps them in ``jax.profiler.TraceAnnotation(JAX_WAIT, reason=...,
source=...)`` (:func:`d2l_async.capture.jax_wait` does).  As on the engine, a wait is recorded only
when the value was not ready: a span during which no execution ended converted a ready value, and is
kept as ``runtime``.  A wait inside another (an ``Await`` inside an annotated ``print``) is the same
wait: only the outermost is kept.

Python-tracer slices (``$``-named, ``python_tracer_level=1``), the compiler's threads and the
runtime's bookkeeping slices (``ParseArguments``, ``Handle inputs``, ...) are skipped and counted in
``meta["skipped"]``.  A trace of an accelerator (``/device:GPU:0`` processes), a torch.profiler trace
or anything else is refused with a :class:`TraceError` that says what the file holds.

Only the standard library, numpy and (optionally) msgspec.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from .._args import path as as_path
from ._json import HAVE_MSGSPEC, PEAK_FACTOR, SLOW_PEAK_FACTOR, check_max_bytes, default_max_bytes, read_bytes
from ._lanes import unique_name
from ._model import Kind, Lane, LaneRole, Trace, TraceError

__all__ = ["JAX_WAIT", "DISPATCH_CALLS", "read_jax_trace", "looks_like_jax", "refuse_jax_file", "find_jax_file"]

#: The TraceAnnotation name of a wait the reader files as a ``block`` (``reason``, ``source`` in its args)
JAX_WAIT = "d2l_async.wait"
#: Slices of the dispatching thread that enqueue one execution (one per device of the launch): jax 0.10's
#: ``CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice`` (verified), and the ``ExecuteHelper`` of the CPU
#: client's executables of earlier releases (``PjRtCpuExecutable``, ``TfrtCpuExecutable``; by name, not verified)
DISPATCH_CALLS = re.compile(r"^\w+Executable::ExecuteHelper(?:OnSingleDevice)?$")
#: The jitted function a dispatch runs: ``PjitFunction(dot)``
_FUNCTION = re.compile(r"^(?:Pjit|Pmap)Function\((.*)\)$")
#: Runtime calls of the dispatching thread worth a bar: a transfer, the compiler
RUNTIME_CALLS = frozenset({"DevicePut", "lower_sharding_computation", "backend_compile_and_load"})
_ASARRAY = "np.asarray(jax.Array)"
_AWAIT = "CommonPjRtBuffer::Await"
#: what a file's process names say it is
_HOST, _DEVICE = "/host:", "/device:"
#: bytes of a file's (inflated) start read to tell a jax.profiler file by its process names
_SNIFF_BYTES = 1 << 20
_KINDS = {k.value: i for i, k in enumerate(Kind)}


def find_jax_file(path: str | os.PathLike[str]) -> Path:
    """The trace file to read for ``path``: the file itself, or in a folder (``jax.profiler.trace``'s
    ``log_dir``, or one run's folder) the newest run's ``perfetto_trace.json.gz``, else its
    ``<host>.trace.json.gz``.

    Returns:
        The path of the JSON file.

    Raises:
        TraceError: a folder without a jax.profiler trace file in it.
    """
    path = Path(path)
    if not path.is_dir():
        return path
    found = sorted(path.glob("perfetto_trace.json*")) or sorted(path.glob("*.trace.json*"))
    if not found:
        runs = sorted(p for p in path.glob("plugins/profile/*") if p.is_dir())
        for run in reversed(runs):  # run folders are named by their start time: the newest last
            found = sorted(run.glob("perfetto_trace.json*")) or sorted(run.glob("*.trace.json*"))
            if found:
                break
    if not found:
        raise TraceError(f"{path}: a folder without a jax.profiler trace (no perfetto_trace.json.gz or "
                         "<host>.trace.json.gz, here or under plugins/profile/<run>/); pass jax.profiler.trace's "
                         "log_dir, or the file")
    return found[0]


def looks_like_jax(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` (a regular file, gzip or plain) names a ``/host:`` or ``/device:`` process in its
    first megabyte: a jax.profiler trace (torch.profiler names its processes by pid and ``GPU n``).

    Returns:
        ``True`` for a file that looks like a jax.profiler trace, ``False`` for any other file, a folder or a
        path that is not a regular file.
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return False
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, _SNIFF_BYTES)
        except zlib.error:
            return False
    return jax_process_names(_process_names_in(head)) != []


def _process_names_in(head: bytes) -> list[str]:
    return [m.decode("utf-8", "replace") for m in re.findall(rb'"name"\s*:\s*"(/(?:host|device):[^"]*)"', head)]


def jax_process_names(names: Iterable[Any]) -> list[str]:
    """The names among ``names`` that jax.profiler gives its processes (``/host:CPU``, ``/device:GPU:0``)."""
    return [str(n) for n in names if isinstance(n, str) and n.startswith((_HOST, _DEVICE))]


def refuse_jax_file(path: Any, process_names: Iterable[Any]) -> None:
    """For a reader of another format: a TraceError when the file's processes are jax.profiler's.

    Raises:
        TraceError: ``process_names`` include ``/host:...`` or ``/device:...`` processes.
    """
    jax_names = jax_process_names(process_names)
    if jax_names:
        raise TraceError(f"{path}: a jax.profiler trace (processes {sorted(set(jax_names))[:4]}): its slices have no "
                         "'cat', so this reader sees no work in it; read it with read_jax_trace(path) or "
                         "read_trace(path)")


# -- the file ------------------------------------------------------------------------------------
def read_jax_trace(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> Trace:
    """Load a ``jax.profiler`` trace of JAX's CPU backend as a :class:`Trace` (see the module docstring).

    Args:
        path: the ``perfetto_trace.json.gz`` or ``<host>.trace.json.gz`` file, or the ``log_dir`` given to
            ``jax.profiler.trace`` (its newest run is read).
        max_bytes: the most bytes of JSON to read (a gzip file's inflated size).  Default: what fits in
            the memory available now.

    Returns:
        The trace: each dispatching thread a frontend lane (dispatches as ``launch``, jitted functions as
        ``op``, waits as ``block``), each CPU device a backend lane ``"cpu:N (XLA)"`` with one ``op`` per
        execution, linked to its dispatch by ``flow`` and ``issue``; times in seconds from the first event.
        ``meta`` holds ``source="jax"``, ``path``, ``device``, ``unmatched_launches``,
        ``unmatched_executions``, ``inline_executions``, ``nested_waits``, ``skipped`` and ``origin_us``.

    Raises:
        TraceError: the file is missing, too large, not JSON, not a jax.profiler trace (a torch.profiler
            trace, or no ``/host:`` process), a trace of an accelerator (``/device:`` processes: only the
            CPU backend's traces are read), holds no JAX work, or has malformed events; the message names
            the file and what it holds.
    """
    path = as_path("path", path)
    max_bytes = check_max_bytes(max_bytes)
    file = find_jax_file(path)
    if max_bytes is None:  # the events become Python dicts: the standard library's peak, not the lean reader's
        max_bytes = max(1, default_max_bytes()[0] * PEAK_FACTOR // SLOW_PEAK_FACTOR)
    raw = read_bytes(file, max_bytes)
    try:
        doc = _decode(raw)
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"{file}: not valid JSON ({exc})") from None
    del raw
    try:
        return _parse(doc, file)
    except TraceError as exc:
        if str(file) in str(exc):
            raise
        raise TraceError(f"{file}: {exc}") from None
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise TraceError(f"{file}: malformed trace event data ({type(exc).__name__}: {exc})") from None


def _decode(raw: bytes) -> Any:
    if HAVE_MSGSPEC:
        import msgspec

        try:
            return msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise ValueError(str(exc)) from None
    return json.loads(raw)


@dataclass
class _Slice:
    thread: Any
    name: str
    start: float  # µs, the file's clock
    end: float
    args: dict[str, Any]
    flow: int = -1  # a dispatch's link to its execution


@dataclass
class _Execution:
    device: int
    run_id: int
    name: str
    start: float
    end: float
    thread: Any
    flow: int = -1
    issue: float = float("nan")
    inline: bool = False


@dataclass
class _Row:
    lane: str
    kind: str
    name: str
    start: float
    end: float
    issue: float = float("nan")
    device: str = ""
    flow: int = -1
    source: str = ""
    reason: str = ""


@dataclass
class _Sorted:
    """One file's slices, sorted out (see :func:`_collect`)."""

    processes: dict[Any, str]
    threads: dict[tuple[Any, Any], str]
    host: list[_Slice] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)


def _collect(doc: Any, path: Path) -> _Sorted:
    """The host process's slices; process and thread names; counts of what is skipped."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        got = f"keys {sorted(doc)[:6]}" if isinstance(doc, dict) else type(doc).__name__
        raise TraceError(f"{path}: not a Chrome-format trace: expected an object with a 'traceEvents' list, got {got}")
    processes: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    slices = []
    cats: Counter = Counter()
    phases: Counter = Counter()
    for e in events:
        if not isinstance(e, dict):
            phases["not an object"] += 1
            continue
        ph = e.get("ph")
        if ph == "M":
            name, value = e.get("name"), (e.get("args") or {}).get("name") if isinstance(e.get("args"), dict) else None
            if name == "process_name" and isinstance(value, str):
                processes[e.get("pid")] = value
            elif name == "thread_name" and isinstance(value, str):
                threads[(e.get("pid"), e.get("tid"))] = value
        elif ph == "X":
            slices.append(e)
            if "cat" in e:
                cats[str(e["cat"])] += 1
        elif e:  # jax writes one empty {} at the end of its list
            phases[f"ph={ph}"] += 1
    hosts = [pid for pid, nm in processes.items() if nm.startswith(_HOST)]
    devices = sorted({nm for nm in processes.values() if nm.startswith(_DEVICE)})
    if devices:
        raise TraceError(f"{path}: a jax.profiler trace of an accelerator (processes {devices[:4]}): this reader "
                         "reads traces of JAX's CPU backend only (its device slices are not verified); profile "
                         "on the CPU (JAX_PLATFORMS=cpu) to read it here")
    if not hosts:
        seen = sorted(set(processes.values()))[:4]
        what = (f"slices with a 'cat' ({', '.join(k for k, _ in cats.most_common(3))}): a torch.profiler/Kineto trace, "
                "read it with read_chrome_trace(path)" if cats else
                f"{len(slices)} slices and processes {seen or 'without names'}")
        raise TraceError(f"{path}: not a jax.profiler trace: no '/host:CPU' process, but {what}")
    host = set(hosts)
    out = _Sorted(processes, threads)
    for e in slices:
        if e.get("pid") not in host:
            out.skipped["other processes"] += 1
            continue
        name = e.get("name")
        if not isinstance(name, str):
            raise TraceError(f"{path}: a slice's 'name' is not a string ({name!r})")
        ts, dur = _number(e.get("ts"), "ts", name, path), _number(e.get("dur", 0.0), "dur", name, path)
        if dur < 0:
            raise TraceError(f"{path}: slice {name!r} has a negative duration ({dur!r} µs)")
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        out.host.append(_Slice((e.get("pid"), e.get("tid")), name, ts, ts + dur, args))
    out.skipped.update(phases)
    return out


def _number(v: Any, what: str, name: str, path: Path) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise TraceError(f"{path}: slice {name!r} has a non-numeric or missing {what!r} ({v!r})") from None
    if not np.isfinite(x) or abs(x) > 1e17:
        raise TraceError(f"{path}: slice {name!r} has {what!r} out of range ({v!r} µs)")
    return x


def _parse(doc: Any, path: Path) -> Trace:
    s = _collect(doc, path)
    execs = _executions(s)
    fronts = _frontend_threads(s)
    by_thread: dict[Any, list[_Slice]] = defaultdict(list)
    for sl in s.host:
        if sl.name.startswith("$"):
            s.skipped["python tracer"] += 1
        elif "run_id" not in sl.args:
            by_thread[sl.thread].append(sl)
    for th in by_thread:
        by_thread[th] = sorted(by_thread[th], key=lambda x: (x.start, -x.end))
    dispatching = any(DISPATCH_CALLS.match(sl.name) for th in fronts for sl in by_thread[th])
    if not execs and not dispatching:
        raise TraceError(f"{path}: a jax.profiler trace without JAX work: no dispatch and no execution among its "
                         f"{len(s.host)} host slices (was any JAX code run inside jax.profiler.trace?)")
    if not dispatching:
        seen = Counter(sl.name for th in (fronts or by_thread) for sl in by_thread[th])
        raise TraceError(f"{path}: {len(execs)} executions but no dispatch the reader knows (it reads jax 0.10's "
                         f"'...Executable::ExecuteHelper...' slices); the dispatching threads' slices are "
                         f"{[n for n, _ in seen.most_common(6)]}: a JAX release this reader does not know")
    lanes: list[Lane] = []
    used: set[str] = set()
    lane_of: dict[Any, str] = {}
    for th in fronts:
        name = unique_name(s.threads.get(th) or f"thread {th[1]}", th, used)
        used.add(name)
        lane_of[th] = name
        lanes.append(Lane(name, LaneRole.FRONTEND))
    rows: list[_Row] = []
    dispatches: list[tuple[_Slice, str]] = []
    waits: list[tuple[_Slice, str, str]] = []
    for th in fronts:
        ops: list[_Slice] = []
        for sl in by_thread[th]:
            fn = _FUNCTION.match(sl.name)
            if fn:
                if ops and ops[-1].name == sl.name and sl.end <= ops[-1].end:  # the same call, traced twice
                    s.skipped[sl.name] += 1
                    continue
                ops.append(sl)
                rows.append(_Row(lane_of[th], Kind.OP.value, sl.name, sl.start, sl.end))
            elif DISPATCH_CALLS.match(sl.name):
                dispatches.append((sl, _enclosing(ops, sl)))
            elif sl.name in RUNTIME_CALLS:
                rows.append(_Row(lane_of[th], Kind.RUNTIME.value, sl.name, sl.start, sl.end))
            elif sl.name == JAX_WAIT:
                waits.append((sl, str(sl.args.get("reason") or "wait"), str(sl.args.get("source") or "")))
            elif sl.name == _ASARRAY:
                waits.append((sl, "np.asarray", ""))
            elif sl.name != _AWAIT:
                s.skipped[sl.name] += 1
        waits += [(w, "await", "") for w in _await_spans(by_thread[th])]
    for th, slices in by_thread.items():
        if th not in lane_of:
            s.skipped["runtime threads' own slices"] += len(slices)
    unmatched_launches = _link(dispatches, execs)
    device_of = {e.flow: f"cpu:{e.device}" for e in execs if e.flow >= 0}
    for d, _ in dispatches:  # a dispatch targets its execution's device
        rows.append(_Row(lane_of[d.thread], Kind.LAUNCH.value, d.name, d.start, d.end,
                         device=device_of.get(d.flow, ""), flow=d.flow))
    nested, wait_rows = _wait_rows(waits, execs, lane_of)
    rows += wait_rows
    for ordinal in sorted({e.device for e in execs}):
        lanes.append(Lane(_device_lane(ordinal), LaneRole.BACKEND, device=f"cpu:{ordinal}", stream=ordinal))
    for e in execs:
        e.inline = e.thread in lane_of
        rows.append(_Row(_device_lane(e.device), Kind.OP.value, e.name, e.start, e.end, issue=e.issue,
                         device=f"cpu:{e.device}", flow=e.flow))
    return _build(rows, lanes, path, {
        "unmatched_launches": unmatched_launches,
        "unmatched_executions": sum(1 for e in execs if e.flow < 0),
        "inline_executions": sum(1 for e in execs if e.inline),
        "nested_waits": nested,
        "skipped": dict(s.skipped.most_common()),
        "threads": {lane_of[th]: s.threads.get(th, "") for th in fronts},
    })


def _device_lane(ordinal: int) -> str:
    return f"cpu:{ordinal} (XLA)"


def _executions(s: _Sorted) -> list[_Execution]:
    """One record per execution: every slice with its ``run_id`` on one device, whichever thread ran it."""
    groups: dict[tuple[int, int], _Execution] = {}
    for sl in s.host:
        if "run_id" not in sl.args:
            continue
        try:
            key = (int(sl.args.get("device_ordinal", 0)), int(sl.args["run_id"]))
        except (TypeError, ValueError):
            raise TraceError(f"slice {sl.name!r} has a run_id or device_ordinal that is not an integer "
                             f"({sl.args.get('run_id')!r}, {sl.args.get('device_ordinal')!r})") from None
        e = groups.get(key)
        module = sl.args.get("hlo_module")
        if e is None:
            groups[key] = _Execution(key[0], key[1], str(module or "execution"), sl.start, sl.end, sl.thread)
            continue
        if sl.start < e.start:
            e.start, e.thread = sl.start, sl.thread
        e.end = max(e.end, sl.end)
        if module and e.name == "execution":
            e.name = str(module)
    return sorted(groups.values(), key=lambda e: (e.start, e.run_id))


def _frontend_threads(s: _Sorted) -> list[Any]:
    """Threads that dispatch or call jitted functions, in order of their first such slice."""
    first: dict[Any, float] = {}
    for sl in s.host:
        if DISPATCH_CALLS.match(sl.name) or sl.name == JAX_WAIT or _FUNCTION.match(sl.name):
            first[sl.thread] = min(first.get(sl.thread, sl.start), sl.start)
    return sorted(first, key=first.__getitem__)


def _enclosing(ops: list[_Slice], sl: _Slice) -> str:
    """The function name of the innermost jitted-function slice around ``sl`` ("" when none)."""
    for op in reversed(ops):
        if op.start <= sl.start and sl.end <= op.end:
            return _key(_FUNCTION.match(op.name).group(1))
    return ""


def _key(name: str) -> str:
    """A function's name as XLA spells its module: ``<lambda>`` and ``jit__lambda`` both ``lambda``."""
    return re.sub(r"[^\w.-]", "_", name).strip("_")


def _module_key(module: str) -> str:
    return _key(re.sub(r"^(?:jit|pmap|xmap)_", "", module))


def _link(dispatches: list[tuple[_Slice, str]], execs: list[_Execution]) -> int:
    """Pair dispatches with executions (see the module docstring); returns the dispatches left unpaired."""
    flow = 0

    def pair(d: _Slice, e: _Execution) -> None:
        nonlocal flow
        flow += 1
        d.flow = e.flow = flow
        e.issue = d.start

    # an execution run inside its dispatch, on the dispatching thread (inline): that one, exactly
    inline: dict[int, _Execution] = {}
    for d, key in dispatches:
        inner = next((e for e in execs if e.thread == d.thread and d.start <= e.start and e.end <= d.end
                      and id(e) not in {id(x) for x in inline.values()}
                      and (not key or _module_key(e.name) == key)), None)
        if inner is not None:
            inline[id(d)] = inner
    reserved = {id(e) for e in inline.values()}
    # each device runs its executions in the order they were dispatched: walk every device's sequence once
    seqs: dict[int, list[_Execution]] = defaultdict(list)
    for e in execs:
        seqs[e.device].append(e)
    pos = dict.fromkeys(seqs, 0)
    where = {id(e): (dev, i) for dev, seq in seqs.items() for i, e in enumerate(seq)}
    for d, key in sorted(dispatches, key=lambda dk: dk[0].start):
        if id(d) in inline:
            e = inline[id(d)]
            dev, i = where[id(e)]
            pos[dev] = i + 1  # earlier heads of its device were dispatched before the recording
            pair(d, e)
            continue
        best: tuple[float, int] | None = None
        for dev, seq in seqs.items():
            i = pos[dev]
            while i < len(seq) and seq[i].start < d.start and id(seq[i]) not in reserved:
                i += 1  # began before this dispatch: an earlier one's, or dispatched before the recording
            pos[dev] = i
            if i == len(seq) or id(seq[i]) in reserved:  # the device's next execution belongs to a later dispatch
                continue
            e = seq[i]
            if key and _module_key(e.name) != key:
                continue
            # where this dispatch's execution would start on this device: at once, or when the one before ends
            predicted = max(d.start, seq[i - 1].end) if i else d.start
            miss = abs(e.start - predicted)
            if best is None or miss < best[0]:
                best = (miss, dev)
        if best is not None:
            dev = best[1]
            pair(d, seqs[dev][pos[dev]])
            pos[dev] += 1
    return sum(1 for d, _ in dispatches if d.flow < 0)


def _await_spans(slices: list[_Slice]) -> list[_Slice]:
    """``CommonPjRtBuffer::Await`` slices of one thread as waits: two in a row with nothing between
    them are one wait (the thread slept from the first to the second); a lone one is its own span."""
    out = []
    i = 0
    while i < len(slices):
        sl = slices[i]
        if sl.name != _AWAIT:
            i += 1
            continue
        nxt = slices[i + 1] if i + 1 < len(slices) else None
        if nxt is not None and nxt.name == _AWAIT:
            out.append(_Slice(sl.thread, _AWAIT, sl.start, nxt.end, {}))
            i += 2
        else:
            out.append(sl)
            i += 1
    return out


def _wait_rows(waits: list[tuple[_Slice, str, str]], execs: list[_Execution],
               lane_of: dict[Any, str]) -> tuple[int, list[_Row]]:
    """The outermost waits of each thread: a ``block`` where an execution ended during it, else the
    ``runtime`` of converting a ready value.  Returns (waits dropped as nested, rows)."""
    ends = np.sort(np.array([e.end for e in execs], dtype=np.float64), kind="stable")
    rows, nested = [], 0
    waits = sorted(waits, key=lambda w: (w[0].thread, w[0].start, -w[0].end))
    outer: _Slice | None = None
    for sl, reason, source in waits:
        if outer is not None and outer.thread == sl.thread and sl.end <= outer.end:
            nested += 1
            continue
        outer = sl
        ended = np.searchsorted(ends, sl.end, side="right") - np.searchsorted(ends, sl.start, side="right")
        kind = Kind.BLOCK.value if ended > 0 else Kind.RUNTIME.value
        name = reason if sl.name == JAX_WAIT else sl.name
        rows.append(_Row(lane_of[sl.thread], kind, name, sl.start, sl.end, source=source,
                         reason=reason if kind == Kind.BLOCK.value else ""))
    return nested, rows


def _build(rows: list[_Row], lanes: list[Lane], path: Path, facts: dict[str, Any]) -> Trace:
    rows = sorted(rows, key=lambda r: (r.start, r.end))  # stable, as every order of events here
    origin = min((r.start for r in rows), default=0.0)
    cols = {
        "lane": [r.lane for r in rows], "kind": [r.kind for r in rows], "name": [r.name for r in rows],
        "issue": np.array([r.issue for r in rows], dtype=np.float64),
        "start": np.array([r.start for r in rows], dtype=np.float64),
        "end": np.array([r.end for r in rows], dtype=np.float64),
        "device": [r.device for r in rows], "flow": np.array([r.flow for r in rows], dtype=np.int64),
        "source": [r.source for r in rows], "reason": [r.reason for r in rows],
    }
    for k in ("issue", "start", "end"):
        cols[k] = (cols[k] - origin) / 1e6
    devices = sorted({l.device for l in lanes if l.device})
    meta = {"source": "jax", "path": str(path), "virtual": False, "origin_us": origin,
            "device": (f"CPU ({len(devices)} XLA CPU device{'s' if len(devices) != 1 else ''}: "
                       f"{', '.join(devices)}; JAX's runtime threads, from a jax.profiler trace)"), **facts}
    return Trace.from_columns(cols, lanes, meta)
