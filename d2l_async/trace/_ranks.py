"""Several ranks of a distributed job in one trace: one lane group per rank, on one clock.

A distributed job writes one profiler trace per process (rank).  HolisticTraceAnalysis's
``trace_dir`` convention is a folder with one ``.json``/``.json.gz`` file per rank, the rank read
from the file's ``distributedInfo.rank``.  :func:`read_trace_dir` loads such a folder and
:func:`merge_ranks` combines traces already in memory (``d2l_async.capture`` of each process,
``read_chrome_trace`` of each file)::

    rank 0 · thread 6450 (python)            frontend   \\
    rank 0 · thread 6504 (pt_gloo_runloop)   backend     > lane group "rank 0"
    rank 0 · cuda:0 stream 7                 backend    /
    rank 1 · thread 6451 (python)            frontend   \\  lane group "rank 1"
    ...

Lanes: each lane keeps its role, device and stream; its name becomes ``"rank R · <name>"``, its
``group`` ``"rank R"`` and its ``rank`` R (see :class:`~d2l_async.trace.Lane`).  Ranks are drawn
one above the other in increasing rank order; within a rank, frontend lanes first.
:func:`rank_lanes` tells a rank's frontend, compute and communication lanes apart.

Events: ``id`` and ``flow`` (correlation ids) are offset per rank so they stay unique (each rank
numbers its own from 0 or 1), ``deps`` follow their ids; every other column is kept.

Clock: profiler timestamps are microseconds on the host's wall clock (absolute, or relative to
``baseTimeNanoseconds``), so each rank's trace knows where its time zero sits
(``meta["origin_us"]`` and ``meta["base_time_ns"]``).  Every rank is shifted to the earliest
rank's zero, which puts the ranks of one host on one clock exactly and ranks of several hosts
within their clocks' sync (NTP: typically well under a millisecond).  A trace without an absolute
origin (an engine recording) cannot be placed: all ranks then start at 0 and
``meta["clock"]`` says so.
"""

from __future__ import annotations

import os
import re
import stat
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ._chrome import read_chrome_trace
from ._job import MixedJobs, job_problems, origin_ns
from ._kineto import COLLECTIVE_PREFIXES
from ._model import COLUMNS, Lane, Trace, TraceError
from ._stack import PYTHON_GROUP
from .._args import TRACE_HINT, instance
from .._args import path as as_path

__all__ = ["merge_ranks", "split_ranks", "read_trace_dir", "rank_lanes", "RankLanes",
           "SkippedEntries", "MissingRanks"]

_COMM_THREAD = re.compile(r"gloo|nccl|ucc|mpi", re.IGNORECASE)
_RANK_IN_NAME = re.compile(r"(?:rank|worker)[_\-. ]?(\d+)", re.IGNORECASE)
SEP = " · "


@dataclass(frozen=True)
class RankLanes:
    """The lanes of one rank, by what they do (names as in the merged trace)."""

    rank: int
    frontend: tuple[str, ...]
    compute: tuple[str, ...]
    communication: tuple[str, ...]
    python_stack: tuple[str, ...] = ()  # the call-stack lanes of a with_stack=True profile


def _is_comm_lane(trace: Trace, lane: Lane, names: np.ndarray) -> bool:
    if lane.is_frontend:
        return False
    if _COMM_THREAD.search(lane.name.split(SEP)[-1]):
        return True
    return bool(len(names)) and all(str(n).startswith(COLLECTIVE_PREFIXES) for n in np.unique(names))


def rank_lanes(trace: Trace, rank: int | None = None) -> tuple[RankLanes, ...] | RankLanes:
    """Each rank's frontend, compute and communication lanes.

    Communication lanes are backend lanes of collective work: the ``pt_gloo_runloop`` threads of a
    gloo CPU trace (events ``gloo:all_reduce``), or GPU streams that run only NCCL kernels.

    Args:
        trace: a merged trace (:func:`merge_ranks`, :func:`read_trace_dir`) or a single-rank one
            (then its lanes count as rank ``-1``).
        rank: one rank; ``None`` for all, in display order.

    Returns:
        With ``rank=None``, a tuple of frozen :class:`RankLanes` (rank, frontend, compute, communication and
        Python-stack lane names), one per rank in display order (a single ``rank=-1`` entry for a single-rank
        trace); with ``rank``, that rank's :class:`RankLanes`.

    Raises:
        TypeError: ``trace`` is not a Trace.
        TraceError: ``rank`` is not one of the trace's ranks.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"rank_lanes expects a Trace, got {type(trace).__name__}")
    lane_col = trace["lane"]
    out = []
    for r in trace.ranks or (-1,):
        front, comp, comm, stack = [], [], [], []
        for lane in trace.lanes:
            if lane.rank != r:
                continue
            if lane.group.endswith(PYTHON_GROUP):
                stack.append(lane.name)
            elif lane.is_frontend:
                front.append(lane.name)
            elif _is_comm_lane(trace, lane, trace["name"][lane_col == lane.name]):
                comm.append(lane.name)
            else:
                comp.append(lane.name)
        out.append(RankLanes(r, tuple(front), tuple(comp), tuple(comm), tuple(stack)))
    if rank is None:
        return tuple(out)
    for rl in out:
        if rl.rank == rank:
            return rl
    raise TraceError(f"no rank {rank!r} in this trace; ranks are {list(trace.ranks)}")


def rank_value(meta: Mapping[str, Any], key: str, rank: int, default: Any) -> Any:
    """``meta[key][rank]`` of a merged trace's per-rank tables (``offsets_s``, ``id_offsets``, ...);
    the keys are strings after a round trip through JSON."""
    table = meta.get(key) or {}
    return table.get(rank, table.get(str(rank), default))


def rank_metas(trace: Trace) -> list[tuple[int, float, Mapping[str, Any]]]:
    """``(rank, clock shift in seconds, the rank's own meta)`` for each rank of a merged trace;
    ``[(-1, 0.0, trace.meta)]`` for one process's trace.

    Returns:
        A list of ``(rank, shift_s, meta)`` tuples, in ``meta["per_rank"]``'s order (entries whose meta is not a
        dict are skipped); the shift is 0.0 for a rank without an offset.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    per_rank = trace.meta.get("per_rank")
    if not isinstance(per_rank, dict):
        return [(-1, 0.0, trace.meta)]
    return [(int(r), float(rank_value(trace.meta, "offsets_s", int(r), 0.0)), m)
            for r, m in per_rank.items() if isinstance(m, dict)]


def merge_ranks(traces: Mapping[int, Trace]) -> Trace:
    """Combine per-rank traces into one trace with one lane group per rank (see the module doc).

    Args:
        traces: rank -> that rank's trace (``d2l_async.capture(...)``, ``read_chrome_trace``).

    Returns:
        One trace: lanes ``"rank R · <lane>"`` grouped by rank (``Lane.group``, ``Lane.rank``),
        ranks in increasing order, times on the earliest rank's clock.  ``meta`` has
        ``source`` (the ranks' common source, else ``"mixed"``), ``ranks``, ``clock``
        (``"profiler"`` or ``"each rank from its own start"``), ``offsets_s`` (rank -> seconds
        added to its times) and ``per_rank`` (rank -> that rank's meta).

    Raises:
        TypeError: ``traces`` is not a mapping of int ranks to traces.
        TraceError: it is empty, or a rank is negative.
    """
    if not isinstance(traces, Mapping):
        raise TypeError(f"merge_ranks expects a mapping rank -> Trace, got {type(traces).__name__}")
    if not traces:
        raise TraceError("merge_ranks needs at least one rank's trace")
    for r, t in traces.items():
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0:
            raise TraceError(f"ranks must be integers >= 0, got {r!r}")
        if not isinstance(t, Trace):
            raise TypeError(f"rank {r}: expected a Trace, got {type(t).__name__}")
    ranks = sorted(int(r) for r in traces)
    items = [(r, traces[r]) for r in ranks]
    origins = {r: origin_ns(t) for r, t in items}
    if all(o is not None for o in origins.values()):
        zero = min(origins.values())
        offsets = {r: (origins[r] - zero) / 1e9 for r in ranks}
        clock = "profiler"
    else:
        offsets = {r: 0.0 for r in ranks}
        clock = "each rank from its own start"

    lanes: list[Lane] = []
    parts: dict[str, list[np.ndarray]] = {name: [] for name in COLUMNS}
    id_base = flow_base = 0
    id_offsets: dict[int, int] = {}
    flow_offsets: dict[int, int] = {}
    for r, t in items:
        id_offsets[r], flow_offsets[r] = id_base, flow_base
        group = f"rank {r}"
        rename = {l.name: f"{group}{SEP}{l.name}" for l in t.lanes}
        lanes += [replace(l, name=rename[l.name], group=f"{group}{SEP}{l.group}" if l.group else group, rank=r)
                  for l in t.lanes]
        c = t.columns
        n = len(t)
        lane_new = np.empty(n, dtype=object)
        lane_new[:] = [rename[x] for x in c["lane"].tolist()]
        parts["lane"].append(lane_new)
        parts["id"].append(c["id"] + id_base)
        deps = np.empty(n, dtype=object)
        deps[:] = [tuple(int(d) + id_base for d in ds) if ds else () for ds in c["deps"].tolist()]
        parts["deps"].append(deps)
        parts["flow"].append(np.where(c["flow"] >= 0, c["flow"] + flow_base, -1))
        for name in ("issue", "start", "end"):
            parts[name].append(c[name] + offsets[r])
        for name in COLUMNS:
            if name not in ("lane", "id", "deps", "flow", "issue", "start", "end"):
                parts[name].append(c[name])
        if n:
            id_base += max(int(c["id"].max()) + 1, 0)
            flow_base += max(int(c["flow"].max()) + 1, 0)
    cols = {name: np.concatenate(arrs) if arrs else np.zeros(0, dtype=COLUMNS[name])
            for name, arrs in parts.items()}
    for name, dtype in COLUMNS.items():
        cols[name] = np.asarray(cols[name], dtype=dtype)
        cols[name].flags.writeable = False
    sources = {t.meta.get("source", "?") for _, t in items}
    devices = list(dict.fromkeys(str(t.meta.get("device", "")) for _, t in items if t.meta.get("device")))
    meta: dict[str, Any] = {
        "source": sources.pop() if len(sources) == 1 else "mixed",
        "device": f"{len(ranks)} ranks: " + "; ".join(devices) if devices else f"{len(ranks)} ranks",
        "virtual": any(t.is_virtual for _, t in items),
        "ranks": ranks,
        "clock": clock,
        "offsets_s": offsets,
        "id_offsets": id_offsets,
        "flow_offsets": flow_offsets,
        "per_rank": {r: dict(t.meta) for r, t in items},
    }
    if clock == "profiler":
        first = min(ranks, key=lambda r: origins[r])
        meta["origin_us"] = traces[first].meta.get("origin_us")
        if "base_time_ns" in traces[first].meta:
            meta["base_time_ns"] = traces[first].meta["base_time_ns"]
    return Trace(tuple(lanes), cols, meta)


def split_ranks(trace: Trace) -> dict[int, Trace]:
    """The inverse of :func:`merge_ranks`: rank -> that rank's trace, as it was before the merge.

    Each part has the rank's lanes with their own names (no ``"rank R · "``), its own clock, ids
    and correlation ids (the merge's offsets undone) and its own meta, plus ``meta["distributed"]``
    (``rank``, ``world_size`` and ``backend`` where the rank's file said so) for the writer's
    ``distributedInfo``.

    Returns:
        Rank -> that rank's :class:`Trace`, in the merged trace's rank order.

    Raises:
        TraceError: the trace has no ranks (it is one rank's trace already).
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"split_ranks expects a Trace, got {type(trace).__name__}")
    if not trace.ranks:
        raise TraceError("the trace has no ranks to split (it is one process's trace already)")
    meta = trace.meta

    world = len(trace.ranks)
    out: dict[int, Trace] = {}
    rank_of = {l.name: l.rank for l in trace.lanes}
    row_rank = np.fromiter((rank_of.get(x, -1) for x in trace["lane"].tolist()), dtype=np.int64, count=len(trace))
    for r in trace.ranks:
        prefix = f"rank {r}{SEP}"
        lanes = [replace(l, name=l.name.removeprefix(prefix), rank=-1,
                         group="" if l.group == f"rank {r}" else l.group.removeprefix(prefix))
                 for l in trace.lanes if l.rank == r]
        mask = row_rank == r
        c = {k: v[mask] for k, v in trace.columns.items()}
        shift = float(rank_value(meta, "offsets_s", r, 0.0))
        id_off, flow_off = int(rank_value(meta, "id_offsets", r, 0)), int(rank_value(meta, "flow_offsets", r, 0))
        c["lane"] = np.array([x.removeprefix(prefix) for x in c["lane"].tolist()], dtype=object)
        for name in ("issue", "start", "end"):
            c[name] = c[name] - shift
        c["id"] = c["id"] - id_off
        c["flow"] = np.where(c["flow"] >= 0, c["flow"] - flow_off, -1)
        deps = np.empty(int(mask.sum()), dtype=object)
        deps[:] = [tuple(int(d) - id_off for d in ds) if ds else () for ds in c["deps"].tolist()]
        c["deps"] = deps
        own = dict(rank_value(meta, "per_rank", r, {}) or {})
        info = (own.get("file") or {}).get("distributedInfo")
        info = dict(info) if isinstance(info, dict) else {}
        own["distributed"] = {**info, "rank": r, "world_size": info.get("world_size", world)}
        out[r] = Trace.from_columns(c, lanes, own)
    return out


def _rank_of(trace: Trace, path: Path) -> int | None:
    info = (trace.meta.get("file") or {}).get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int) and not isinstance(info["rank"], bool):
        return int(info["rank"])
    m = _RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


class SkippedEntries(UserWarning):
    """Entries of a trace folder named like traces that were not read (the message names each)."""


class MissingRanks(UserWarning):
    """A trace folder lacks ranks its files' world size declares (the message lists them)."""


def trace_dir_files(path: str | os.PathLike[str]) -> tuple[list[Path], list[str]]:
    """The trace files of a ``trace_dir`` (``*.json`` and ``*.json.gz``; HTA: ``*.json``, ``*.gz``),
    and why each other entry so named was skipped: a broken or looping link, a folder, a FIFO, a
    device (a trace is read only from a regular file)."""
    folder = as_path("path", path)
    if not folder.is_dir():
        raise TraceError(f"{folder}: not a folder; path= must be a folder of per-rank traces"
                         + (" (for one file use read_chrome_trace)" if folder.is_file() else ""))
    files, skipped = [], []
    for p in sorted(folder.iterdir()):
        if not (p.name.endswith(".json") or p.name.endswith(".gz")):
            continue
        try:
            mode = os.stat(p).st_mode
        except FileNotFoundError:
            skipped.append(f"{p.name} (a broken symbolic link)" if os.path.islink(p) else f"{p.name} (gone)")
            continue
        except OSError as exc:
            skipped.append(f"{p.name} ({exc.strerror or exc})")
            continue
        if stat.S_ISREG(mode):
            files.append(p)
        else:
            kind = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
                    stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}.get(stat.S_IFMT(mode), "not a file")
            skipped.append(f"{p.name} ({kind}, not a regular file)")
    if not files:
        raise TraceError(f"{folder}: no trace files (*.json, *.json.gz) in this folder"
                         + (f"; skipped: {', '.join(skipped)}" if skipped else ""))
    return files, skipped


def _missing_ranks(by_rank: Mapping[int, Trace]) -> tuple[int, list[int]] | None:
    """``(world size, ranks missing)`` when every file declaring a world size declares the same
    one and ranks below it are absent; None otherwise."""
    sizes = set()
    for t in by_rank.values():
        info = (t.meta.get("file") or {}).get("distributedInfo")
        ws = info.get("world_size") if isinstance(info, dict) else None
        if isinstance(ws, int) and not isinstance(ws, bool) and ws > 0:
            sizes.add(ws)
    if len(sizes) != 1:
        return None  # none declared, or several (job_problems reports those)
    world = sizes.pop()
    missing = [r for r in range(world) if r not in by_rank]
    return (world, missing) if missing else None


def _spans(ranks: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``."""
    out, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ", ".join(out)


def read_trace_dir(path: str | os.PathLike[str], *, strict: bool = False, max_bytes: int | None = None) -> Trace:
    """Load a folder of per-rank Chrome traces (HTA's ``trace_dir``) as one merged trace.

    The rank of each file is its ``distributedInfo.rank``; a file without one takes the number in
    its name (``rank3.json.gz``, ``worker_3.pt.trace.json``); a lone file without either is rank 0.

    The files should be one job's: the same world size and backend, each rank below the world
    size, and time ranges that overlap (``_job.py``).  When they are not, the merged timeline is
    not one run's: a :class:`~d2l_async.trace.MixedJobs` warning names the files (``strict=True``
    raises instead), and ``meta["job_problems"]`` keeps the reasons.  Entries named like traces
    that cannot be read as files (broken or looping links, FIFOs) warn with
    :class:`SkippedEntries`, ranks below the declared world size that no file holds with
    :class:`MissingRanks` (``meta["skipped_entries"]``, ``meta["missing_ranks"]``).

    Args:
        path: the folder.
        strict: raise instead of warning when the files are not one job's.
        max_bytes: the most JSON to read per file (default: what fits in the memory available
            when the file is read, ``read_chrome_trace``).

    Returns:
        The merged trace (:func:`merge_ranks`), its ``meta`` also holding ``path`` (the folder), ``files`` (rank ->
        file path) and, where they apply, ``job_problems``, ``skipped_entries`` and ``missing_ranks``.

    Raises:
        TraceError: not a folder, no trace files, a file that cannot be read (named), a file
            whose rank cannot be told, two files with the same rank (both named), or, with
            ``strict=True``, files that are not one job's.
    """
    if not isinstance(strict, (bool, np.bool_)):
        raise TypeError(f"strict must be True or False, got {strict!r}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"read_trace_dir expects a folder path (str or os.PathLike), got {type(path).__name__}")

    files, skipped = trace_dir_files(path)
    if skipped:
        warnings.warn(f"{Path(path)}: {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} named like a trace "
                      f"not read: {'; '.join(skipped)}", SkippedEntries, stacklevel=2)
    by_rank: dict[int, Trace] = {}
    where: dict[int, Path] = {}
    for f in files:
        t = read_chrome_trace(f, max_bytes=max_bytes)
        r = _rank_of(t, f)
        if r is None:
            if len(files) > 1:
                raise TraceError(f"{f}: no distributedInfo.rank in the file and no rank number in its name; "
                                 "add \"distributedInfo\": {\"rank\": N} or name it rankN.json")
            r = 0
        if r in by_rank:
            raise TraceError(f"{where[r]} and {f} both say rank {r}; a trace_dir holds one file per rank")
        by_rank[r], where[r] = t, f
    missing = _missing_ranks(by_rank)
    if missing:
        world, gone = missing
        warnings.warn(f"{Path(path)}: the files declare a world of {world} ranks; {len(gone)} of them have no "
                      f"file here: rank{'s' if len(gone) > 1 else ''} {_spans(gone)} (the merged trace shows "
                      f"{len(by_rank)} of {world})", MissingRanks, stacklevel=2)
    problems = job_problems(by_rank, where)
    if problems:
        msg = (f"{Path(path)}: the files do not look like one job: " + "; ".join(problems)
               + ("" if strict else "; merged anyway (strict=True raises)"))
        if strict:
            raise TraceError(msg)
        warnings.warn(msg, MixedJobs, stacklevel=3)
    merged = merge_ranks(by_rank)
    extra: dict[str, Any] = {"job_problems": problems} if problems else {}
    if skipped:
        extra["skipped_entries"] = skipped
    if missing:
        extra["missing_ranks"] = missing[1]
    return merged.with_meta(path=str(Path(path)), files={r: str(p) for r, p in where.items()}, **extra)
