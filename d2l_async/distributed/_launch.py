"""Start N ranks as processes, wait for them with a deadline, and never leave one behind.

:func:`launch` is a small, careful ``torch.multiprocessing.spawn``::

    parent (your notebook's kernel)                 ranks (clean processes: forkserver / spawn)
      pick a free TCP port on 127.0.0.1
      start rank 0 .. N-1 (deadline kept) ------->  die with the launching process (a watchdog on
                                                    its pid, and PR_SET_PDEATHSIG)
                                                    init_process_group(backend, tcp://127.0.0.1:port)
      poll the result queue (0.1 s ticks) <-------  ("ok", rank, value)      fn(ctx) returned
              |                             <-------  ("error", rank, type, message, traceback)
              |  an error, a rank that died silently, the deadline, or Ctrl-C:
              v
      finally: terminate() every live rank, join(2 s), kill() what is left, join(2 s)

Why each piece:

* **a clean process, never a fork of the kernel**: a forked Jupyter kernel carries its threads'
  locks and zmq sockets into the child.  Ranks come from multiprocessing's fork server (which has
  imported torch once, so later runs start in a fraction of a second) or are spawned; either way a
  rank imports the function it runs by name, so the function must live in a module
  (``d2l_async.distributed`` ships the chapter's); one defined in a notebook cell cannot be found
  by the child and is refused here with a message that says so.
* **a free port per run**: two runs (or two notebooks) never meet on the same rendezvous port.
* **a deadline on every wait**: a rank stuck in a collective (its peer died) would wait for gloo's
  30-minute timeout; the parent gives up at ``timeout`` seconds, names the ranks that did not
  report, and ends every process.
* **errors travel with their traceback**: a rank that raises sends the formatted traceback before it
  exits; the parent raises :class:`RankError` with it, at once (the peers still blocked in a
  collective are terminated, not waited for).
* **the right rank blamed**: a rank that dies without a word (a segfault, ``os._exit``,
  the OOM killer) makes its peers fail with "Connection reset by peer"; the parent names the rank
  that died, with its exit code or signal, and gives the peers' errors as what followed.  A value
  that cannot be pickled is reported as such by the rank that returned it.
* **nothing outlives the launching process**: when the kernel that called
  :func:`launch` is killed -- even by SIGKILL, where no ``finally`` runs -- every rank and the fork
  server exit within a second: each watches the launching process (a pidfd on Linux, else a poll
  of its pid) and the parent-death signal backs that up.  The first start of the fork server
  (tens of seconds on a busy machine: it imports torch) counts against ``timeout`` too.

torch is imported in the ranks only; this module itself needs only the standard library.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_mod
import signal
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ._rank import RankContext, _rank_main, run_rank
from .._args import flag, function, instance, integer, mapping, path

__all__ = ["BACKENDS", "DistributedError", "LaunchResult", "RankContext", "RankDied", "RankError", "RankTimeout",
           "free_port", "is_alive", "launch"]

#: The process-group backends: gloo (CPU, any machine) and NCCL (one GPU per rank).
BACKENDS = ("gloo", "nccl")
#: Seconds a terminated rank gets to exit before it is killed.
_GRACE_S = 2.0
#: How often the parent looks at its ranks while it waits.
_TICK_S = 0.1


class DistributedError(RuntimeError):
    """A distributed run failed; the message says which rank and why."""


class RankError(DistributedError):
    """A rank raised.  ``rank``, ``exc_type`` and ``remote_traceback`` say where and what;
    ``latency_s`` how long the error took from the rank's ``raise`` to this exception."""

    def __init__(self, rank: int, exc_type: str, message: str, remote_traceback: str,
                 raised_at: float | None = None) -> None:
        self.rank = rank
        self.exc_type = exc_type
        self.remote_traceback = remote_traceback
        self.latency_s = time.time() - raised_at if raised_at is not None else float("nan")
        super().__init__(f"rank {rank} raised {exc_type}: {message}\n\n"
                         f"Traceback in rank {rank}:\n{remote_traceback.rstrip()}")


class RankDied(DistributedError):
    """A rank ended without reporting (a signal, ``os._exit``, the OOM killer); ``rank``,
    ``pid`` and ``exitcode`` (negative: the signal) say which and how."""

    def __init__(self, rank: int, pid: int | None, exitcode: int | None, followed: str = "") -> None:
        self.rank, self.pid, self.exitcode = rank, pid, exitcode
        then = f" What followed: {followed}." if followed else ""
        super().__init__(f"rank {rank} (pid {pid}) exited with code {exitcode} without reporting a result"
                         f"{_signal_name(exitcode)}; the other ranks were ended.{then}")


class RankTimeout(DistributedError, TimeoutError):
    """The ranks did not all finish within the deadline; they were ended.

    Attributes:
        ranks: the ranks that had not reported (empty when the ranks did not even start).
        pids: their process ids, in the order of ``ranks``.
    """

    def __init__(self, message: str, *, ranks: tuple[int, ...] = (), pids: tuple[int | None, ...] = ()) -> None:
        super().__init__(message)
        self.ranks = tuple(ranks)
        self.pids = tuple(pids)


@dataclass(frozen=True)
class LaunchResult:
    """What came back from every rank.

    Attributes:
        values: what each rank's function returned, by rank.
        trace_dir: where the ranks wrote their traces (``None`` when not profiled).
        pids: the process id of each rank (all ended when :func:`launch` returns).
        seconds: wall time from the first start to the last result, process start-up included.
        backend: the process-group backend.
    """

    values: tuple[Any, ...]
    trace_dir: str | None
    pids: tuple[int, ...]
    seconds: float
    backend: str

    @property
    def world_size(self) -> int:
        return len(self.values)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (the OS picks it), for one run's rendezvous.

    Returns:
        The port number the OS bound and released (another process may take it before the run does).
    """
    instance("host", host, str, what="str (an IPv4 address such as '127.0.0.1')")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, 0))
        except OSError as e:  # socket.gaierror included: a name that does not resolve
            raise ValueError(f"host={host!r} is not an address of this machine ({e}); use '127.0.0.1'") from None
        return int(s.getsockname()[1])


def is_alive(pid: int) -> bool:
    """True while process ``pid`` exists and has not exited (a zombie counts as gone).

    Returns:
        ``True`` while the process runs (or exists but belongs to another user), ``False`` once it is gone or a
        zombie.
    """
    pid = integer("pid", pid, minimum=1)
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): ask the kernel
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def _check(fn: Any, world_size: Any, backend: Any, timeout: Any, **optional: Any) -> None:
    """Every argument of :func:`launch`, the cheap ones first; ``fn``'s importability last, since a
    reader fixing a lambda should not then meet a refused ``world_size``."""
    if not callable(fn):
        raise TypeError(f"fn: launch expects a function to run on each rank, got {type(fn).__name__} {fn!r:.80}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or not 1 <= world_size <= 64:
        raise ValueError(f"world_size must be an integer between 1 and 64, got {world_size!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: use one of {BACKENDS}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if optional.get("trace_dir") is not None:
        path("trace_dir", optional["trace_dir"])
    if "profile" in optional:
        flag("profile", optional["profile"])
    if optional.get("options") is not None:
        mapping("options", optional["options"], what="keyword arguments for the rank function")
    if optional.get("on_start") is not None:
        function("on_start", optional["on_start"], what="a function of the ranks' process ids, or None")
    if "start_method" in optional and optional["start_method"] not in ("auto", "forkserver", "spawn"):
        raise ValueError(f"start_method={optional['start_method']!r}: use 'auto', 'forkserver' or 'spawn'")
    module = getattr(fn, "__module__", None)
    if module in (None, "__main__") or getattr(fn, "__qualname__", "").count("<"):
        raise ValueError(f"fn={getattr(fn, '__qualname__', fn)!r} is defined in {module or 'no module'} (a notebook "
                         "cell, a lambda or a nested function): spawned ranks import the function by name, so it "
                         "must be a top-level function of a module file (e.g. d2l_async.distributed.ranks)")


def launch(fn: Callable[[RankContext], Any], world_size: int = 2, *, backend: str = "gloo",
           trace_dir: str | os.PathLike[str] | None = None, profile: bool = True, timeout: float = 120.0,
           options: Mapping[str, Any] | None = None,
           on_start: Callable[[tuple[int, ...]], None] | None = None,
           start_method: str = "auto") -> LaunchResult:
    """Run ``fn(ctx)`` on ``world_size`` local ranks joined in one process group.

    Args:
        fn: a top-level function of a module (spawned ranks import it by name); it gets a
            :class:`RankContext` and returns something picklable and small (numbers, dicts).
        world_size: number of ranks (processes).
        backend: ``"gloo"`` (CPU) or ``"nccl"`` (needs one CUDA GPU per rank).
        trace_dir: folder for the per-rank traces; default a new temporary folder (the caller's to
            delete: the experiments do, after reading it).
        profile: False to give the ranks no ``trace_dir`` (no traces written).
        timeout: seconds for the whole run, start-up included; then every rank is ended.
        options: keyword arguments for the rank function, as ``ctx.options``.
        on_start: called with the ranks' process ids once all have started (a progress display,
            a test that checks no process outlives the call).
        start_method: ``"auto"`` (the fork server where the platform has one, else spawn),
            ``"forkserver"`` or ``"spawn"`` (a fresh interpreter per rank: slower, nothing shared).

    Returns:
        :class:`LaunchResult` (every rank has exited by then).

    Raises:
        RankError: a rank raised; its traceback is in the message (the other ranks were ended).
        RankTimeout: not every rank finished within ``timeout`` (all were ended).
        DistributedError: a rank died without reporting (killed, out of memory, a crash in C++).
        ValueError: bad arguments, or NCCL without a GPU for every rank.
    """
    _check(fn, world_size, backend, timeout, trace_dir=trace_dir, profile=profile, options=options, on_start=on_start,
           start_method=start_method)
    if backend == "nccl":
        _check_gpus(world_size)
    if profile:
        trace_dir = str(trace_dir) if trace_dir is not None else tempfile.mkdtemp(prefix="d2l_async_ranks_")
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
    else:
        trace_dir = None
    ctx = _context(start_method)
    results = ctx.Queue()
    port = free_port()
    procs: list[Any] = []
    t0 = time.perf_counter()
    values: dict[int, Any] = {}
    try:
        made = [ctx.Process(target=_rank_main, args=(fn, RankContext(
                    rank, world_size, backend, "cpu" if backend == "gloo" else f"cuda:{rank}", trace_dir,
                    dict(options or {})), port, results, os.getpid()), name=f"d2l_async rank {rank}", daemon=True)
                for rank in range(world_size)]
        _start_all(made, procs, t0 + timeout, timeout)
        if on_start is not None:
            on_start(tuple(p.pid for p in procs))
        _collect(procs, results, values, t0 + timeout, timeout)
        seconds = time.perf_counter() - t0
        for p in procs:  # they have reported; let them finish tearing down
            p.join(timeout=_GRACE_S * 5)
    finally:
        end_all(procs)
        results.close()
        results.join_thread()
    return LaunchResult(tuple(values[r] for r in range(world_size)), trace_dir, tuple(p.pid for p in procs), seconds,
                        backend)


#: What a fresh rank imports before it can run anything (seconds of work once, not once per rank).
#: ``torch._dynamo``: DistributedDataParallel imports it when constructed (~800 modules, sympy among
#: them: 4 s on an idle core, measured with torch 2.13 CPU).
_PRELOAD = ["d2l_async.distributed._watchdog", "torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo",
            "d2l_async.distributed.ranks"]  # the watchdog first: the fork server ends with its launcher


def _context(start_method: str = "auto") -> Any:
    """``forkserver`` where the platform has it, else ``spawn``.

    Both start ranks from a clean process, never from a fork of the notebook's kernel.  The fork
    server imports torch once (``_PRELOAD``) and forks each rank from that clean, single-threaded
    state, so the second and later runs of a notebook skip the ~2 s import per rank; ``spawn``
    pays it every time.
    """
    if start_method != "spawn" and "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return mp.get_context("spawn")


def _check_gpus(world_size: int) -> None:
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < world_size:
        raise ValueError(f"backend='nccl' needs one CUDA GPU per rank: {world_size} ranks, {n} GPUs here; "
                         "use backend='gloo' (CPU) or fewer ranks")


def _start_all(made: list[Any], procs: list[Any], deadline: float, timeout: float) -> None:
    """Start the processes, keeping the deadline (the first start of the fork server
    imports torch -- 30 s at load 15 -- inside ``Process.start``, which nothing interrupts).

    A helper thread starts them; this thread waits in ticks (a Ctrl-C gets through).  At the
    deadline, or on Ctrl-C, a fork server still starting is ended, which frees the helper.
    """
    done = threading.Event()
    failed: list[BaseException] = []

    def starter() -> None:
        try:
            for p in made:
                p.start()
                procs.append(p)
        except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
            failed.append(exc)
        finally:
            done.set()

    helper = threading.Thread(target=starter, name="d2l_async rank starter", daemon=True)
    helper.start()
    try:
        while not done.wait(_TICK_S):
            if time.perf_counter() > deadline:
                raise RankTimeout(f"the ranks did not start within {timeout:g} s (the first run of a session "
                                  "starts a fork server that imports torch: slow on a busy machine); every "
                                  "process was ended. Raise timeout= or try again")
    except BaseException:
        _stop_fork_server()
        done.wait(_GRACE_S * 5)
        helper.join(_GRACE_S)
        raise
    if failed:
        raise failed[0]


def _stop_fork_server() -> None:
    """End multiprocessing's fork server (it may be blocking a ``Process.start``); the next run
    starts a new one."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _collect(procs: list[Any], results: Any, values: dict[int, Any], deadline: float, timeout: float) -> None:
    """Wait for every rank's report; raise at the first error, silent death or the deadline."""
    world = len(procs)
    silent_since: dict[int, float] = {}
    while len(values) < world:
        try:
            msg = results.get(timeout=_TICK_S)
        except queue_mod.Empty:
            msg = None
        if msg is not None:
            if msg[0] == "ok":
                values[msg[1]] = msg[2]
            else:
                raise _root_cause(msg, results, procs, values)
            continue
        now = time.perf_counter()
        for rank, p in enumerate(procs):
            if rank in values or p.exitcode is None:
                continue
            # exited without a report: give its last message a moment to arrive through the pipe
            first = silent_since.setdefault(rank, now)
            if now - first > 1.0:
                raise RankDied(rank, p.pid, p.exitcode)
        if now > deadline:
            missing = tuple(r for r in range(world) if r not in values)
            pids = tuple(procs[r].pid for r in missing)
            hung = ", ".join(f"rank {r} (pid {pid})" for r, pid in zip(missing, pids))
            raise RankTimeout(f"{hung} did not finish within {timeout:g} s; every rank was ended. "
                              "Raise timeout= for bigger workloads, or look for a rank waiting in a collective "
                              "its peers never entered", ranks=missing, pids=pids)


#: What a rank's error says when it only saw a peer go away (the peer's own error is the news).
_PEER_GONE = ("Connection closed by peer", "remote worker crashing", "Connection reset by peer")


def _root_cause(first: tuple[Any, ...], results: Any, procs: list[Any] = (), values: Mapping[int, Any] = {},
                wait: float = 0.3, died_wait: float = 3.0) -> DistributedError:
    """The error to report: the first one that is not just "my peer went away"; when every error is
    that, the rank that went away -- named with its exit code or signal (a segfaulting
    rank was reported as its survivor's "Connection reset by peer")."""
    errors = [first]
    deadline = time.perf_counter() + wait
    while time.perf_counter() < deadline:
        try:
            msg = results.get(timeout=max(deadline - time.perf_counter(), 0.01))
        except queue_mod.Empty:
            break
        if msg[0] == "error":
            errors.append(msg)
    own = [e for e in errors if not any(p in e[3] for p in _PEER_GONE)]
    if not own and procs:
        reported = {e[1] for e in errors} | set(values)
        end = time.perf_counter() + died_wait  # a dead peer's exit code takes a moment to show
        while True:
            dead = [(r, p) for r, p in enumerate(procs) if r not in reported and p.exitcode is not None]
            if dead or time.perf_counter() > end:
                break
            time.sleep(0.05)
        if dead:
            rank, p = dead[0]
            followed = "; ".join(f"rank {e[1]} then raised {e[2]}: {e[3].strip().splitlines()[0] if e[3].strip() else ''}"
                                 for e in errors)
            return RankDied(rank, p.pid, p.exitcode, followed)
    _, rank, exc_type, message, tb, raised_at = (own or errors)[0]
    return RankError(rank, exc_type, message, tb, raised_at)


def _signal_name(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f" (killed by {signal.Signals(-code).name})"
        except ValueError:
            return ""
    return ""


def end_all(procs: list[Any], grace: float = _GRACE_S) -> None:
    """terminate() every live process, wait ``grace`` s, kill() the rest, wait again."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=grace)
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(timeout=grace)
