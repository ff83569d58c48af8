"""The engine's numbers: the book's sync-vs-async benchmark, frontend progress, scheduling overhead.

1. **The book's benchmark** (D2L 12.2): 10,000 x ``y = x + 1`` on a one-element array, synchronous
   (``y.wait_to_read()`` after each push) vs asynchronous (one ``eng.waitall()`` at the end), on a
   ``ThreadedEngine()`` with default settings (recording on), a fresh engine per run, runs
   alternating sync/async so a busy neighbour slows both alike.  Targets: ratio >= 3.5
   and async <= 15 us per op, median of the runs.  Eager torch's per-op time is measured beside it.
   Python's garbage collector stays on (it is part of "all-in": 10,000 pending ops are 30,000 live
   objects, enough to trigger a full collection now and then); the same runs with the collector
   off, as ``timeit`` measures, are reported too.
2. **Frontend progress**: a pure-Python loop on the frontend while one worker runs 100 matmuls of
   1000 x 1000, as a fraction of the loop's solo rate (target >= 50 %: torch kernels release the GIL).
   The same loop beside the same matmuls on a plain ``threading.Thread`` is the ceiling on this
   machine (on a shared 2-core machine, other people's processes take their share of both).
3. **Scheduling overhead** vs workers 1, 2, 4, 8, 16 (per-op cost of a tiny op):
   :func:`d2l_async.engine.measure_scheduling_overhead`, the table the notebooks read.
4. **What recording costs**: 1,000,000 tiny ops recorded (``y = x + 1``, and
   ``x += 1``): bytes of the recorder's columns per op (goal <= 100), ``eng.trace()`` seconds for
   them (goal <= 2 s on the 2-core development machine; decoding every lean column into a plain
   ``Trace.from_columns`` afterwards is timed beside it), and on 200,000 ops
   the process's memory growth per op measured by ``tracemalloc`` (everything recording keeps:
   columns, tables, read ids), with ``record=False`` beside it.  And from part 1, the async
   per-op cost with recording on as a ratio to eager torch in the same run (goal <= 2.5).
5. **What a trace costs**: ``eng.trace()`` of 1,000,000 recorded ``y = x + 1``: its
   seconds (goal <= 2 s), the bytes per row it keeps (goal <= 150: its columns are lean, strings
   by code and tuples flat, decoded when first read) and the peak while it is built (goal <= 300
   MB), by ``tracemalloc``; and the bytes per row once every column has been read.

Run: ``.venv/bin/python benchmarks/bench_engine.py [--repeat 3] [--out benchmarks/results/engine.json]``.
The machine is shared: the load average is saved with the numbers; rerun when it is quiet.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import torch

from d2l_async.engine import ThreadedEngine, measure_scheduling_overhead

OUT = Path(__file__).parent / "results" / "engine.json"
N = 10_000
TARGET_RATIO = 3.5
TARGET_ASYNC_US = 15.0
TARGET_PROGRESS = 0.5
TARGET_ASYNC_OVER_EAGER = 2.5
TARGET_BYTES_PER_OP = 100
TARGET_TRACE_S = 2.0
TARGET_BYTES_PER_ROW = 150  # a trace row, as eng.trace() returns it
TARGET_TRACE_PEAK_MB = 300  # building the trace of 1M ops
RECORD_OPS = 1_000_000


def book_run(mode: str, gc_on: bool = True) -> tuple[float, float]:
    """Microseconds per op for one run of 10,000 ``y = x + 1`` (``mode``: sync or async): wall
    time, and the process's CPU time (all threads; less sensitive to a busy neighbour)."""
    with ThreadedEngine() as eng:
        x = eng.array(torch.ones(1))
        for _ in range(200):  # warm up: shape cache, thread start
            y = x + 1
        eng.waitall()
        if not gc_on:
            gc.disable()
        try:
            c0, t0 = time.process_time(), time.perf_counter()
            if mode == "sync":
                for _ in range(N):
                    y = x + 1
                    y.wait_to_read()
            else:
                for _ in range(N):
                    y = x + 1
                eng.waitall()
            t, c = time.perf_counter() - t0, time.process_time() - c0
        finally:
            gc.enable()
    return t / N * 1e6, c / N * 1e6


def eager_run() -> float:
    x = torch.ones(1)
    t0 = time.perf_counter()
    for _ in range(N):
        y = x + 1
    del y
    return (time.perf_counter() - t0) / N * 1e6


def book(repeat: int, gc_on: bool) -> dict:
    sync, asyn, eager, sync_cpu, async_cpu = [], [], [], [], []
    for _ in range(repeat):
        for mode, wall, cpu in (("sync", sync, sync_cpu), ("async", asyn, async_cpu)):
            w, c = book_run(mode, gc_on)
            wall.append(w)
            cpu.append(c)
        eager.append(eager_run())
    s, a = statistics.median(sync), statistics.median(asyn)
    return {"gc": gc_on, "sync_us_per_op": s, "async_us_per_op": a, "ratio": s / a,
            "eager_torch_us_per_op": statistics.median(eager),
            "sync_cpu_us_per_op": statistics.median(sync_cpu), "async_cpu_us_per_op": statistics.median(async_cpu),
            "runs": {"sync": sync, "async": asyn, "eager": eager, "sync_cpu": sync_cpu, "async_cpu": async_cpu},
            "async_over_eager": a / statistics.median(eager),
            "meets_targets": s / a >= TARGET_RATIO and a <= TARGET_ASYNC_US,
            "meets_async_over_eager": a / statistics.median(eager) <= TARGET_ASYNC_OVER_EAGER}


def _python_work(iterations: int = 20_000) -> int:
    s = 0
    for i in range(iterations):
        s += i * i % 7
    return s


def frontend_progress(matmuls: int = 100, size: int = 1000) -> dict:
    """Frontend loop rate while the backend multiplies matrices, relative to the loop alone."""
    def rate(seconds: float, busy=lambda: True) -> tuple[float, float]:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds and busy():
            _python_work()
            n += 1
        dt = time.perf_counter() - t0
        return n / dt, dt

    _python_work()
    solo_before, _ = rate(1.0)
    with ThreadedEngine(record=False) as eng:
        a = eng.array(torch.randn(size, size))
        b = eng.array(torch.randn(size, size))
        (a @ b).wait_to_read()  # warm up
        t0 = time.perf_counter()
        for _ in range(matmuls):
            c = a @ b
        pushed = time.perf_counter() - t0
        during, busy_s = rate(120.0, lambda: eng.statistics().pending > 0)
        eng.waitall()
        backend_s = time.perf_counter() - t0
    solo_after, _ = rate(1.0)
    solo = (solo_before + solo_after) / 2

    # the ceiling: the same matmuls on a plain thread (no engine), the same loop beside them
    done = threading.Event()

    def plain() -> None:
        torch.set_num_threads(1)
        x, y = torch.randn(size, size), torch.randn(size, size)
        for _ in range(matmuls):
            x @ y
        done.set()

    t = threading.Thread(target=plain)
    t.start()
    plain_during, _ = rate(120.0, lambda: not done.is_set())
    t.join(120.0)
    return {"matmuls": matmuls, "size": size, "solo_loops_per_s": solo, "during_loops_per_s": during,
            "fraction_of_solo": during / solo, "push_s": pushed, "backend_s": backend_s,
            "measured_s": busy_s, "meets_target": during / solo >= TARGET_PROGRESS,
            "plain_thread_fraction_of_solo": plain_during / solo}


def _loop(eng: ThreadedEngine, n: int, kind: str) -> float:
    """Push ``n`` tiny ops (``y = x + 1`` or ``x += 1``), wait for them; seconds per op."""
    x = eng.array(torch.ones(1), name="x")
    t0 = time.perf_counter()
    if kind == "y = x + 1":
        for _ in range(n):
            y = x + 1
        del y
    else:
        for _ in range(n):
            x += 1
    eng.waitall()
    return (time.perf_counter() - t0) / n


def recording_cost(n: int, kind: str) -> dict:
    """Columns per op and ``trace()`` time for ``n`` recorded ops of ``kind``."""
    from d2l_async.trace import Trace

    with ThreadedEngine(record=n + 10) as eng:
        per_op = _loop(eng, n, kind)
        columns = eng._recorder.nbytes() / n
        gc.collect()
        t0 = time.perf_counter()
        tr = eng.trace()
        trace_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    # for comparison: every column decoded and copied into a plain Trace (what trace() built before
    # trace() itself now returns lean columns and does not call from_columns)
    Trace.from_columns(dict(tr.columns), tr.lanes, dict(tr.meta))
    model_s = time.perf_counter() - t0
    rows = len(tr)
    del tr
    return {"ops": n, "loop": kind, "us_per_op": per_op * 1e6, "column_bytes_per_op": columns,
            "trace_s": trace_s, "rows": rows, "decode_all_and_plain_from_columns_s": model_s,
            "meets_targets": columns <= TARGET_BYTES_PER_OP and trace_s <= TARGET_TRACE_S}


def recording_memory(n: int = 200_000) -> dict:
    """Process memory growth per op (tracemalloc), recording on and off, ``y = x + 1``."""
    import tracemalloc

    out = {"ops": n}
    for record in (True, False):
        with ThreadedEngine(record=n + 10 if record else False) as eng:
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                _loop(eng, n, "y = x + 1")
                gc.collect()
                grown = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()
        out["record_on_bytes_per_op" if record else "record_off_bytes_per_op"] = grown / n
    out["meets_target"] = out["record_on_bytes_per_op"] <= TARGET_BYTES_PER_OP
    return out


def trace_memory(n: int = RECORD_OPS) -> dict:
    """What ``eng.trace()`` of ``n`` recorded ops (``y = x + 1``) costs: seconds, the
    bytes the trace keeps per row and the peak while it is built (``tracemalloc``: numpy's arrays
    are traced too), and the bytes per row once every column has been read (decoded)."""
    import tracemalloc

    with ThreadedEngine(record=n + 10) as eng:
        _loop(eng, n, "y = x + 1")
        gc.collect()
        t0 = time.perf_counter()
        tr = eng.trace()
        seconds = time.perf_counter() - t0
        rows = len(tr)
        del tr
        gc.collect()
        tracemalloc.start()
        try:
            tr = eng.trace()
            kept, peak = tracemalloc.get_traced_memory()
            for name in tr.columns:  # every column read once: decoded and kept
                tr[name]
            decoded = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
    return {"ops": n, "rows": rows, "trace_s": seconds, "bytes_per_row": kept / rows,
            "peak_mb": peak / 2**20, "bytes_per_row_all_columns_read": decoded / rows,
            "meets_targets": kept / rows <= TARGET_BYTES_PER_ROW and seconds <= TARGET_TRACE_S
            and peak / 2**20 <= TARGET_TRACE_PEAK_MB}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--skip-gc-off", action="store_true")
    parser.add_argument("--record-ops", type=int, default=RECORD_OPS, help="ops for the recording cost")
    parser.add_argument("--only-recording", action="store_true", help="part 4 and the per-op ratio only")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    result: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
                    "python": sys.version.split()[0], "torch": torch.__version__,
                    "torch_threads_main": torch.get_num_threads(), "ops": N, "repeat": args.repeat,
                    "load_average_before": load_before,
                    "command": "python benchmarks/bench_engine.py " + " ".join(argv or sys.argv[1:])}

    b = book(args.repeat, gc_on=True)
    result["book"] = b
    print(f"book benchmark, gc on : sync {b['sync_us_per_op']:.1f} us/op, async {b['async_us_per_op']:.1f} "
          f"us/op, ratio {b['ratio']:.2f} (target >= {TARGET_RATIO}, async <= {TARGET_ASYNC_US}); "
          f"eager torch {b['eager_torch_us_per_op']:.2f} us/op; CPU time: sync {b['sync_cpu_us_per_op']:.1f}, "
          f"async {b['async_cpu_us_per_op']:.1f} us/op", flush=True)
    print(f"async with recording / eager torch: {b['async_over_eager']:.2f}x (target <= {TARGET_ASYNC_OVER_EAGER})",
          flush=True)
    for kind in ("y = x + 1", "x += 1"):
        r = recording_cost(args.record_ops, kind)
        result.setdefault("recording", []).append(r)
        print(f"recording {r['ops']:,} x `{kind}`: {r['column_bytes_per_op']:.0f} bytes/op of columns "
              f"(target <= {TARGET_BYTES_PER_OP}), trace() {r['trace_s']:.2f} s for {r['rows']:,} rows "
              f"(target <= {TARGET_TRACE_S} s; decoding every column into a plain Trace after it: "
              f"{r['decode_all_and_plain_from_columns_s']:.2f} s)",
              flush=True)
    t = trace_memory(args.record_ops)
    result["trace_memory"] = t
    print(f"eng.trace() of {t['ops']:,} x `y = x + 1`: {t['trace_s']:.2f} s (target <= {TARGET_TRACE_S}), "
          f"{t['bytes_per_row']:.0f} bytes per row kept (target <= {TARGET_BYTES_PER_ROW}; "
          f"{t['bytes_per_row_all_columns_read']:.0f} once every column is read), peak {t['peak_mb']:.0f} MB while "
          f"built (target <= {TARGET_TRACE_PEAK_MB})", flush=True)
    m = recording_memory()
    result["recording_memory"] = m
    print(f"memory growth per op (tracemalloc, {m['ops']:,} x `y = x + 1`): recording on "
          f"{m['record_on_bytes_per_op']:.0f} B, off {m['record_off_bytes_per_op']:.0f} B", flush=True)
    if args.only_recording:
        args.skip_gc_off = True
    if not args.skip_gc_off:
        g = book(args.repeat, gc_on=False)
        result["book_gc_off"] = g
        print(f"book benchmark, gc off: sync {g['sync_us_per_op']:.1f} us/op, async {g['async_us_per_op']:.1f} "
              f"us/op, ratio {g['ratio']:.2f}; CPU time: async {g['async_cpu_us_per_op']:.1f} us/op", flush=True)

    if args.only_recording:
        return _save(args, result, load_before)
    p = frontend_progress()
    result["frontend_progress"] = p
    print(f"frontend progress during {p['matmuls']} matmuls {p['size']}x{p['size']}: "
          f"{100 * p['fraction_of_solo']:.0f} % of solo rate (target >= {100 * TARGET_PROGRESS:.0f} %); "
          f"beside a plain torch thread (no engine): {100 * p['plain_thread_fraction_of_solo']:.0f} %", flush=True)

    rows = measure_scheduling_overhead(workers=(1, 2, 4, 8, 16), ops=5000, repeats=args.repeat)
    result["scheduling"] = [{"workers": r.workers, "per_op_us": r.per_op_us, "runs": list(r.runs)} for r in rows]
    print("scheduling overhead: " + ", ".join(f"{r.workers} workers {r.per_op_us:.1f} us" for r in rows))

    return _save(args, result, load_before)


def _save(args: argparse.Namespace, result: dict, load_before: tuple) -> int:
    result["load_average_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {args.out} (load average before {load_before[0]:.2f}, after {result['load_average_after'][0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
