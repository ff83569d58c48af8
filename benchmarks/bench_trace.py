"""Load a profiler trace and compute its queue-length summary: time and peak memory, ours vs HTA.

Three measurements, each job in a fresh child process so its peak RSS is its own:

1. ``a100``: the 109k-event A100 training-step trace (gzip), ours vs HTA 0.5.0, alternating
   (ours, HTA, ours, HTA, ...) so a busy neighbour slows both alike; medians.  Goal: ours >= 4x
   faster than HTA in the same run.
2. ``large``: a ~200 MB Kineto JSON file (~1.1M events) generated here by repeating the A100 trace
   end to end (times shifted, correlation ids renumbered), never committed.  Goal on this machine:
   load + summary <= 8 s and <= 800 MB peak RSS.  HTA on it with ``--hta-large`` (slow, GBs).
   ``large_rocm``: the same file spelled as ROCm 6.2 writes it: every ``args.stream``
   a hex string (``"0x7"``, also on the launch calls), ``hip*`` runtime names.  Same goals: such a
   file used to leave the reader's fast path (1,177 MB peak).
3. ``json``: the JSON decoders the reader could use, on the A100 trace: stdlib ``json``,
   ``orjson``, ``msgspec`` untyped, ``msgspec`` typed into the reader's records (the choice in
   ``d2l_async/trace/_json.py`` rests on this), and the reader's whole fast path (typed records
   turned into its columns).  An optional decoder that is not installed (``orjson``) is skipped
   with one line.

Run: ``.venv/bin/python benchmarks/bench_trace.py [--repeat 3] [--hta-large]``; writes
``benchmarks/results/trace.json`` and prints the 1-minute load average before and after.  It exits
non-zero when a goal is missed or a job fails (``make benchmarks`` then lists it).  ``--smoke --out
PATH`` runs every job once on a small sample and a ~1 MB generated file, with no goals: the test
suite runs it (``tests/test_benchmarks_run.py``) so a job that no longer runs fails there.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLE = "a100_training_step"
SMOKE_SAMPLE = "a100_simple_add"
GOALS = {"a100_speedup_vs_hta": 4.0, "large_s": 8.0, "large_peak_mb": 800.0}
LARGE_MB = 200
OUT = Path(__file__).parent / "results" / "trace.json"


# -- child jobs: one job per process, result printed as one JSON line --------------------------
def _peak_mb() -> float:
    """This process's peak RSS in MB: VmHWM, which exec resets (ru_maxrss keeps the parent's
    high-water mark across fork + exec, so a child would report at least its parent's size)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(job: str, path: str) -> dict:
    import logging
    import warnings

    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    base = _peak_mb()
    if job == "ours":
        from d2l_async.analysis import queue_length_summary
        from d2l_async.trace import read_chrome_trace

        base = _peak_mb()
        c0, t0 = time.process_time(), time.perf_counter()
        trace = read_chrome_trace(path)
        t1 = time.perf_counter()
        s = queue_length_summary(trace)
        t2, c2 = time.perf_counter(), time.process_time()
        return {"total_s": t2 - t0, "load_s": t1 - t0, "cpu_s": c2 - c0, "events": len(trace), "peak_mb": _peak_mb(),
                "import_mb": base, "max_queue": int(s["max"].max()), "summary_rows": len(s)}
    if job == "hta":
        from hta.trace_analysis import TraceAnalysis

        base = _peak_mb()
        with tempfile.TemporaryDirectory() as d:
            os.symlink(os.path.abspath(path), os.path.join(d, os.path.basename(path)))
            c0, t0 = time.process_time(), time.perf_counter()
            ta = TraceAnalysis(trace_dir=d)
            t1 = time.perf_counter()
            s = ta.get_queue_length_summary(ranks=[next(iter(ta.t.traces))])
            t2, c2 = time.perf_counter(), time.process_time()
        return {"total_s": t2 - t0, "load_s": t1 - t0, "cpu_s": c2 - c0, "peak_mb": _peak_mb(), "import_mb": base,
                "max_queue": int(s[("queue_length", "max")].max())}
    raw = Path(path).read_bytes()
    raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    base = _peak_mb()
    t0 = time.perf_counter()
    if job == "json":
        n = len(json.loads(raw)["traceEvents"])
    elif job == "orjson":
        import orjson

        n = len(orjson.loads(raw)["traceEvents"])
    elif job == "msgspec":
        import msgspec

        n = len(msgspec.json.decode(raw)["traceEvents"])
    elif job == "msgspec_typed":  # typed records, as the reader decodes them
        from d2l_async.trace._json import _DECODER, _TOP

        n = len(_DECODER.decode(_TOP.decode(raw)["traceEvents"]))
    elif job == "reader_columns":  # the reader's whole fast path: typed records -> columns
        from d2l_async.trace._json import _fast

        n = len(_fast(raw, Path(path)).ph)
    else:
        raise SystemExit(f"unknown job {job}")
    return {"total_s": time.perf_counter() - t0, "events": n, "added_mb": _peak_mb() - base}


def run_child(job: str, path: Path, timeout: float = 900) -> dict | None:
    try:
        out = subprocess.run([sys.executable, __file__, "--child", job, str(path)], capture_output=True,
                             text=True, timeout=timeout, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode or not lines:
        return {"error": (out.stderr or out.stdout)[-400:]}
    return json.loads(lines[-1])


# -- the generated large trace -----------------------------------------------------------------
def rocm_style(events: list[dict]) -> list[dict]:
    """The events as ROCm 6.2 spells them: ``args.stream`` a hex string (kernels and, as ROCm
    writes it, the launch calls too), ``hip*`` runtime names instead of ``cuda*``."""
    stream_of = {(e.get("args") or {}).get("correlation"): e["args"]["stream"] for e in events
                 if isinstance((e.get("args") or {}).get("stream"), int)}
    out = []
    for e in events:
        e = dict(e)
        a = e.get("args")
        if isinstance(a, dict):
            a = dict(a)
            if isinstance(a.get("stream"), int):
                a["stream"] = hex(a["stream"])
            if e.get("cat") == "cuda_runtime" and a.get("correlation") in stream_of:
                a["stream"] = hex(stream_of[a["correlation"]])
            e["args"] = a
        if e.get("cat") == "cuda_runtime" and str(e.get("name", "")).startswith("cuda"):
            e["name"] = "hip" + e["name"][4:]
        out.append(e)
    return out


def make_large(src: Path, dst: Path, target_mb: float = LARGE_MB, style: str = "cuda") -> dict:
    """Repeat ``src``'s events end to end until the JSON is ``target_mb``: times shifted by the
    span, correlation ids renumbered, so every copy pairs like the original.  ``style="rocm"``
    spells them as ROCm does (:func:`rocm_style`)."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc.pop("traceEvents")
    if style == "rocm":
        events = rocm_style(events)
    xs = [e for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in xs) - min(e["ts"] for e in xs) + 1000
    corr_max = max((e.get("args") or {}).get("correlation", 0) or 0 for e in events) + 1
    one = len(json.dumps(events, separators=(",", ":")))
    copies = max(1, round(target_mb * 1e6 / one))
    n = 0
    with open(dst, "w") as fh:
        fh.write('{"traceEvents":[')
        first = True
        for k in range(copies):
            for e in events:
                if k and e.get("ph") == "M":
                    continue
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = e2["ts"] + k * span
                a = e2.get("args")
                if isinstance(a, dict) and "correlation" in a:
                    e2["args"] = {**a, "correlation": a["correlation"] + k * corr_max}
                if isinstance(e2.get("id"), int):
                    e2["id"] = e2["id"] + k * corr_max
                fh.write(("" if first else ",") + json.dumps(e2, separators=(",", ":")))
                first = False
                n += 1
        rest = json.dumps(doc, separators=(",", ":"))[1:-1]
        fh.write("]" + ("," + rest if rest else "") + "}")
    return {"copies": copies, "events": n, "mb": dst.stat().st_size / 1e6, "style": style}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hta-large", action="store_true", help="also run HTA on the 200 MB file (slow)")
    parser.add_argument("--smoke", action="store_true",
                        help="every job once, on a small sample and a ~1 MB file; no goals (the test suite's check)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write the results (default {OUT})")
    parser.add_argument("--child", nargs=2, metavar=("JOB", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    if args.smoke:
        args.repeat = 1
    from d2l_async.data import sample_path
    from d2l_async.devices import machine

    try:
        import hta  # noqa: F401

        have_hta = True
    except ImportError:
        have_hta = False
    mach = machine()
    load_before = os.getloadavg()[0]
    path = sample_path(SMOKE_SAMPLE if args.smoke else SAMPLE)
    result: dict = {"command": "python benchmarks/bench_trace.py --repeat " + str(args.repeat)
                    + (" --hta-large" if args.hta_large else "") + (" --smoke" if args.smoke else ""),
                    "machine": mach.describe(),
                    "python": platform.python_version(), "goals": GOALS}

    # 1. the A100 trace, alternating
    runs: dict[str, list] = {"ours": [], "hta": []}
    for _ in range(args.repeat):
        runs["ours"].append(run_child("ours", path))
        if have_hta:
            runs["hta"].append(run_child("hta", path))

    def med(rs, key):
        vals = [r[key] for r in rs if r and key in r]
        return statistics.median(vals) if vals else None

    a100 = {side: {"median_s": med(rs, "total_s"), "median_load_s": med(rs, "load_s"), "median_cpu_s": med(rs, "cpu_s"),
                   "median_peak_mb": med(rs, "peak_mb"), "runs": rs} for side, rs in runs.items() if rs}
    if have_hta and a100["hta"]["median_s"] and a100["ours"]["median_s"]:
        a100["speedup"] = a100["hta"]["median_s"] / a100["ours"]["median_s"]
        a100["speedup_cpu"] = a100["hta"]["median_cpu_s"] / a100["ours"]["median_cpu_s"]
        a100["same_max_queue"] = runs["ours"][0].get("max_queue") == runs["hta"][0].get("max_queue")
    result["a100"] = a100

    # 2. the generated ~200 MB traces, CUDA- and ROCm-style, alternating
    with tempfile.TemporaryDirectory() as d:
        files = {}
        for style, key in (("cuda", "large"), ("rocm", "large_rocm")):
            files[key] = Path(d) / f"large_{style}.json"
            t0 = time.perf_counter()
            result[f"{key}_file"] = make_large(path, files[key], target_mb=1 if args.smoke else LARGE_MB, style=style)
            result[f"{key}_file"]["generate_s"] = time.perf_counter() - t0
        large_runs: dict[str, list] = {key: [] for key in files}
        for _ in range(max(1, min(args.repeat, 2))):
            for key, f in files.items():
                large_runs[key].append(run_child("ours", f))
        for key, rs in large_runs.items():
            result[key] = {"ours": {"median_s": med(rs, "total_s"), "median_load_s": med(rs, "load_s"),
                                    "median_cpu_s": med(rs, "cpu_s"), "median_peak_mb": med(rs, "peak_mb"),
                                    "runs": rs}}
        if args.hta_large and have_hta:
            result["large"]["hta"] = run_child("hta", files["large"], timeout=1800)

        # 3. JSON decoders on the A100 trace (an optional one that is not installed: one line)
        result["json"] = {}
        for job in ("json", "orjson", "msgspec", "msgspec_typed", "reader_columns"):
            if job == "orjson" and importlib.util.find_spec("orjson") is None:
                result["json"][job] = {"skipped": "orjson is not installed (optional: pip install orjson)"}
                continue
            result["json"][job] = run_child(job, path)
    shutil.rmtree(d, ignore_errors=True)

    ours_a = a100["ours"]
    result["meets"] = {"a100_speedup": bool(a100.get("speedup") and a100["speedup"] >= GOALS["a100_speedup_vs_hta"])}
    for key in ("large", "large_rocm"):
        big = result[key]["ours"]
        result["meets"][f"{key}_s"] = bool(big["median_s"] is not None and big["median_s"] <= GOALS["large_s"])
        result["meets"][f"{key}_peak_mb"] = bool(big["median_peak_mb"] is not None
                                                 and big["median_peak_mb"] <= GOALS["large_peak_mb"])
    result["load_average_1min"] = {"before": load_before, "after": os.getloadavg()[0]}
    result["when"] = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{mach.describe()}; load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    if ours_a["median_s"] is None:
        print(f"{path.name}: ours failed", end="")
    else:
        print(f"{path.name}: ours {ours_a['median_s']:.3f} s (CPU {ours_a['median_cpu_s']:.3f} s), "
              f"peak {ours_a['median_peak_mb']:.0f} MB", end="")
    if "hta" in a100 and a100["hta"]["median_s"] is not None and ours_a["median_s"] is not None:
        print(f"; HTA {a100['hta']['median_s']:.3f} s (CPU {a100['hta']['median_cpu_s']:.3f} s), "
              f"peak {a100['hta']['median_peak_mb']:.0f} MB; "
              f"speed-up {a100.get('speedup', float('nan')):.2f}x wall, {a100.get('speedup_cpu', float('nan')):.2f}x CPU "
              f"(goal >= {GOALS['a100_speedup_vs_hta']}x)")
    else:
        print("; HTA failed" if have_hta else "; HTA not installed")
    for key in ("large", "large_rocm"):
        lf, big = result[f"{key}_file"], result[key]["ours"]
        if big["median_s"] is None:
            print(f"{key}: failed: {big['runs'][0].get('error', '')[-300:]}")
            continue
        print(f"{key} ({lf['style']}-style) {lf['mb']:.0f} MB, {lf['events']} events: ours {big['median_s']:.2f} s "
              f"(load {big['median_load_s']:.2f} s, CPU {big['median_cpu_s']:.2f} s), peak {big['median_peak_mb']:.0f} MB "
              f"(goals <= {GOALS['large_s']} s, <= {GOALS['large_peak_mb']} MB)")
    if "hta" in result["large"]:
        h = result["large"]["hta"]
        print(f"large, HTA: {h.get('total_s', float('nan')):.2f} s, peak {h.get('peak_mb', float('nan')):.0f} MB {h.get('error', '')}")
    for job, r in result["json"].items():
        print(f"json decoder {job}: " + (f"{r['total_s']:.3f} s, +{r['added_mb']:.0f} MB" if "total_s" in r else
                                         f"skipped, {r['skipped']}" if "skipped" in r else r.get("error", "")[-120:]))
    result["errors"] = failed_jobs(result)
    for where, error in result["errors"].items():
        print(f"job {where} failed: {error[-300:]}")
    print("goals met:", result["meets"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"saved {args.out}")
    if args.smoke:
        return 1 if result["errors"] else 0
    return 0 if all(result["meets"].values()) and not result["errors"] else 1


def failed_jobs(result: dict) -> dict[str, str]:
    """Where in ``result`` a child job left an error (``"a100.ours[0]"``, ``"json.reader_columns"``) -> the error."""
    out: dict[str, str] = {}

    def walk(node, where: str) -> None:
        if isinstance(node, dict):
            if "error" in node:
                out[where] = str(node["error"])
            for k, v in node.items():
                walk(v, f"{where}.{k}" if where else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")
        elif node is None and where.endswith("]"):
            out[where] = "no result"

    walk(result, "")
    return out


if __name__ == "__main__":
    sys.exit(main())
