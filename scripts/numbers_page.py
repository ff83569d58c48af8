"""Write docs/numbers.md, the measured-numbers page, from benchmarks/results/*.json.

Every measured number on that page is read from a JSON file that a benchmark script wrote; the
sentences around them are fixed text with no measured number in them. Goals come from the
benchmark scripts' own constants (read with ``ast``, nothing imported) or from the JSON, and the
book's numbers from ``d2l_async.experiments.book``. Each table says the command and the load
average its JSON recorded. A JSON this script has no table for is still listed, number by number,
so a new result can never be left off. ``tests/test_docs_generated.py`` fails when the committed
page differs from what this script writes now.

Run: ``python scripts/numbers_page.py`` (or ``make docs``); ``--check`` exits 1 if the page is stale.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BENCH = ROOT / "benchmarks"
OUT = ROOT / "docs" / "numbers.md"
sys.path.insert(0, str(ROOT))

from d2l_async.experiments.book import book_number  # noqa: E402  (stdlib only: no torch)

# -- formatting ----------------------------------------------------------------------------------------


def num(x: float, digits: int = 1) -> str:
    """A number with thousands separators; ``—`` when it was not measured."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:,.{digits}f}"


def us(x: float, digits: int = 1) -> str:
    return f"{num(x, digits)} µs"


def ms(seconds: float, digits: int = 1) -> str:
    return f"{num(None if seconds is None else seconds * 1e3, digits)} ms"


def sec(x: float, digits: int = 2) -> str:
    return f"{num(x, digits)} s"


def times(x: float, digits: int = 2) -> str:
    return f"{num(x, digits)}×"


def pct(fraction: float, digits: int = 0) -> str:
    return f"{num(None if fraction is None else 100 * fraction, digits)} %"


def span(values: list[float], fmt: Callable[[float], str] = num) -> str:
    """``min–max`` of raw runs, in the unit ``fmt`` gives (the unit once, at the end)."""
    if not values:
        return "—"
    lo, hi = fmt(min(values)), fmt(max(values))
    unit = lo.split(" ", 1)[1] if " " in lo else ""
    return f"{lo.split(' ', 1)[0]}–{hi}" if unit and hi.endswith(unit) else f"{lo}–{hi}"


def load(value: Any) -> str:
    """A recorded load average: one number, or the 1-minute one of ``os.getloadavg()``'s three."""
    if value is None:
        return "not recorded"
    if isinstance(value, str):  # a range typed as text
        return value
    if isinstance(value, (list, tuple)):
        value = value[0]
    return num(value, 2)


def met(ok: bool | None) -> str:
    return "—" if ok is None else ("met" if ok else "**missed**")


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def dig(d: Any, path: str, default: Any = None) -> Any:
    """``d["a"]["b"]`` for ``"a.b"``; ``default`` where a part is missing."""
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return default
        d = d[part]
    return d


def constants(script: str) -> dict[str, Any]:
    """The literal module-level constants of a benchmark script (its goals), read without importing it."""
    tree = ast.parse((BENCH / script).read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def provenance(data: dict, script: str, *, load_text: str, extra: str = "") -> str:
    """The lines under each heading: command, machine, load, date — each as the JSON recorded it."""
    cmd = data.get("command")
    if cmd:
        cmd = cmd.replace(".venv/bin/python ", "python ").strip()
        how = f"Command: `{cmd}`."
    else:
        how = f"Command: `python benchmarks/{script}` (this JSON predates recording its arguments)."
    machine = data.get("machine")
    if isinstance(machine, dict):
        machine = ", ".join(f"{k} {v}" for k, v in machine.items())
    parts = [how]
    if machine:
        parts.append(f"Machine: {machine}.")
    parts.append(f"Load average: {load_text}.")
    when = data.get("when") or data.get("date")
    if when:
        parts.append(f"Run: {when}.")
    if extra:
        parts.append(extra[:1].upper() + extra[1:])
    return " ".join(parts)


# -- one renderer per result file ------------------------------------------------------------------------


def engine(data: dict, name: str) -> str:
    c = constants("bench_engine.py")
    out = [provenance(data, "bench_engine.py", load_text=f"{load(data.get('load_average_before'))} before, "
                      f"{load(data.get('load_average_after'))} after", extra=f"With torch {data.get('torch')}.")]
    rows = []
    b = data.get("book")
    sync_book, async_book = book_number("sync_async.sync"), book_number("sync_async.async")
    per_op = data.get("ops", 10_000)
    if b:
        runs = b.get("runs", {})
        ratio_eager = b.get("async_over_eager", b["async_us_per_op"] / b["eager_torch_us_per_op"])
        rows += [
            [f"the book's {per_op:,} × `y = x + 1`, synchronous (`wait_to_read` after each)",
             f"{us(b['sync_us_per_op'])}/op ({span(runs.get('sync', []), us)})",
             f"book (MXNet): {sync_book.value:g} s = {us(sync_book.value / per_op * 1e6, 0)}/op", "—"],
            ["the same, asynchronous (one `waitall`), recording on",
             f"**{us(b['async_us_per_op'])}/op** ({span(runs.get('async', []), us)})",
             f"≤ {us(c['TARGET_ASYNC_US'], 0)}/op; book: {async_book.value:g} s = "
             f"{us(async_book.value / per_op * 1e6, 0)}/op", met(b["async_us_per_op"] <= c["TARGET_ASYNC_US"])],
            ["ratio sync / async (medians)", f"**{times(b['ratio'])}**",
             f"≥ {times(c['TARGET_RATIO'], 1)}; book: {times(book_number('sync_async.ratio').value, 1)}",
             met(b["ratio"] >= c["TARGET_RATIO"])],
            ["eager PyTorch `y = x + 1` (no engine), for scale; async / eager",
             f"{us(b['eager_torch_us_per_op'], 2)}/op; {times(ratio_eager)} "
             f"({span([a / e for a, e in zip(runs.get('async', []), runs.get('eager', []))], times)} over the runs)",
             f"≤ {times(c['TARGET_ASYNC_OVER_EAGER'], 1)}", met(ratio_eager <= c["TARGET_ASYNC_OVER_EAGER"])],
        ]
        if "async_cpu_us_per_op" in b:
            rows.insert(3, ["process CPU time per op, sync / async",
                            f"{us(b['sync_cpu_us_per_op'])} / {us(b['async_cpu_us_per_op'])}", "—", "—"])
    g = data.get("book_gc_off")
    if g:
        rows.append(["the same with the garbage collector off (as `timeit` measures): sync / async, ratio",
                     f"{us(g['sync_us_per_op'])} / {us(g['async_us_per_op'])}; {times(g['ratio'])}", "—", "—"])
    for r in data.get("recording", []):
        rows.append([f"recording {r['ops']:,} × `{r['loop']}`: bytes of columns per op; `eng.trace()` of its "
                     f"{r['rows']:,} rows",
                     f"{num(r['column_bytes_per_op'], 0)} B; {sec(r['trace_s'])}",
                     f"≤ {c['TARGET_BYTES_PER_OP']} B, ≤ {sec(c['TARGET_TRACE_S'], 0)}", met(r.get("meets_targets"))])
    t = data.get("trace_memory")
    if t:
        rows.append([f"`eng.trace()` of {t['ops']:,} recorded `y = x + 1` ({t['rows']:,} rows): seconds; bytes per "
                     "row kept (once every column is read); peak while built (tracemalloc)",
                     f"**{sec(t['trace_s'])}**; {num(t['bytes_per_row'], 0)} B "
                     f"({num(t['bytes_per_row_all_columns_read'], 0)} B); {num(t['peak_mb'], 0)} MB",
                     f"≤ {sec(c['TARGET_TRACE_S'], 0)}, ≤ {c['TARGET_BYTES_PER_ROW']} B, ≤ {c['TARGET_TRACE_PEAK_MB']} MB",
                     met(t.get("meets_targets"))])
    m = data.get("recording_memory")
    if m:
        rows.append([f"memory growth per op ({m['ops']:,} × `y = x + 1`, tracemalloc), recording on / off",
                     f"{num(m['record_on_bytes_per_op'], 0)} / {num(m['record_off_bytes_per_op'], 0)} B",
                     f"≤ {c['TARGET_BYTES_PER_OP']} B", met(m.get("meets_target"))])
    p = data.get("frontend_progress")
    if p:
        rows.append([f"frontend Python loop while the backend runs {p['matmuls']} matmuls "
                     f"{p['size']}×{p['size']}, share of its solo rate (a plain torch thread beside it instead)",
                     f"**{pct(p['fraction_of_solo'])}** ({pct(p['plain_thread_fraction_of_solo'])})",
                     f"≥ {pct(c['TARGET_PROGRESS'])}", met(p.get("meets_target"))])
    s = data.get("scheduling")
    if s:
        rows.append(["engine per-op scheduling cost, " + " / ".join(str(r["workers"]) for r in s) + " workers (wall)",
                     " / ".join(num(r["per_op_us"]) for r in s) + " µs",
                     "measured, not promised: notebook 08 states growth only where its quartiles separate", "—"])
    out.append(table(["what", "ours", "goal / reference", "verdict"], rows))
    if b and name == "engine.json":
        out.append("Where async ÷ eager misses: the frontend pushes each op and the worker books, runs, finishes "
                   "and records it, both in Python taking turns on the one interpreter lock, so for a one-element "
                   "op the worker's bookkeeping, not the kernel, sets the pace.")
    return "\n\n".join(out)


def torch_async(data: dict, name: str) -> str:
    md, raw = data["median"], data.get("raw", {})
    out = [provenance(data, "bench_torch_async.py",
                      load_text=f"{load(data.get('load_avg_1min_before'))} before, {load(data.get('load_avg_1min_after'))} "
                                f"after", extra=f"With torch {data.get('torch')}, {data.get('repeat')} repeats, the worker "
                                                f"{data.get('worker_nice')} nice steps below the frontend. "
                                                f"Verdicts: {data.get('verdicts', '')}.")]

    def r(key: str, fmt=us) -> str:
        return span(raw.get(key, []), fmt)

    def raw_of(key: str, field: str) -> list[float]:
        return [x[field] for x in raw.get(key, []) if isinstance(x, dict) and field in x]

    mlp, kept, nice0, alone, cold, mm = (md.get(k, {}) for k in ("mlp", "mlp_team_kept", "mlp_nice0", "mlp_alone",
                                                                  "cold", "matmuls"))
    goal_cpu, goal_wall, goal_ratio = (data.get(k) for k in ("goal_frontend_us", "goal_frontend_wall_us", "goal_ratio"))
    rows = [
        ["frontend CPU per queued `y = x + 1` (metadata cached), recording off / on",
         f"**{us(md['frontend_cpu_us'])} / {us(md['frontend_recording_cpu_us'])}** (off {r('frontend_cpu_us')})",
         f"≤ {us(goal_cpu, 0)} of the frontend thread's CPU", met(data.get("frontend_goal_met"))],
        ["the same, wall clock per queued op, recording off / on",
         f"{us(md['frontend_us'])} / {us(md['frontend_recording_us'])} (off {r('frontend_us')}, "
         f"on {r('frontend_recording_us')})", f"≤ {us(goal_wall, 0)} wall",
         f"off: {data.get('frontend_wall_goal')}; on: {data.get('frontend_recording_wall_goal')}"],
        ["its two halves: the frontend alone (worker held) + the worker alone (draining them)",
         f"{us(md.get('frontend_held_us'))} + {us(md.get('worker_alone_us'))} = "
         f"{us(md.get('frontend_held_us', 0) + md.get('worker_alone_us', 0))} (together: {us(md['frontend_us'])})",
         "—", "—"],
        ["the same op with the metadata cache cleared before every call", f"{us(md.get('uncached_us'), 0)}", "—", "—"],
        ["eager torch, the same op: wall / CPU", f"{us(md.get('eager_us'), 2)} / {us(md.get('eager_cpu_us'), 2)}",
         "—", "—"],
        ["the book's 10,000 × `y = x + 1` in plain PyTorch: sync / async / eager, per op",
         f"{us(md.get('book_sync_us'))} / {us(md.get('book_async_us'))} / {us(md.get('book_eager_us'))} "
         f"(sync / async {times(data.get('book_ratio_sync_over_async'))})",
         "for tiny ops the frontend is the bottleneck", "—"],
        ["20 matmuls 1000 × 1000: loop returned / finished (eager)",
         f"{ms(mm.get('returned_s'))} / {ms(mm.get('finished_s'), 0)} ({ms(mm.get('eager_s'), 0)})", "—", "—"],
        ["the book's MLP (784-256-10, batch 256, SGD), 20 steps, 1 worker: loop returned / finished (eager), "
         "return ÷ finish",
         f"{ms(mlp.get('returned_s'), 0)} / {ms(mlp.get('finished_s'), 0)} ({ms(mlp.get('eager_s'), 0)}): "
         f"**{num(mlp.get('ratio'), 2)}** ({span(raw_of('mlp', 'ratio'), lambda x: num(x, 2))}); finished "
         f"{times(mlp.get('finished_over_eager'))} eager; losses "
         f"{'bitwise eager' if mlp.get('bitwise_eager') else '**not** bitwise eager'}",
         f"return ≤ {pct(goal_ratio)} of finish", str(data.get("mlp_goal"))],
        ["its two sides apart: the frontend queues the 20 steps (worker held) / the worker runs them "
         "(frontend waiting); the lowest return ÷ finish a perfect overlap allows",
         f"{ms(alone.get('frontend_s'), 0)} / {ms(alone.get('worker_s'), 0)}; {num(alone.get('floor_ratio'), 2)} "
         f"({span(raw_of('mlp_alone', 'floor_ratio'), lambda x: num(x, 2))})", "—", "—"],
        ["the MLP with the frontend's OpenMP threads kept (`free_frontend_team=False`): return ÷ finish; finished "
         "÷ eager", f"{num(kept.get('ratio'), 2)}; {times(kept.get('finished_over_eager'))}", "—", "—"],
        ["the MLP with the worker at the frontend's priority (`worker_nice=0`): return ÷ finish",
         f"{num(nice0.get('ratio'), 2)} ({span(raw_of('mlp_nice0', 'ratio'), lambda x: num(x, 2))})", "—", "—"],
        ["the worker's parallel kernels: 2,000 `relu` of 256 × 256 queued, push to finish, per op: the frontend's "
         "OpenMP threads freed (the default) / kept; eager",
         f"**{us(md.get('kernel_us'))}** ({r('kernel_us')}) / {us(md.get('kernel_team_kept_us'))} "
         f"({r('kernel_team_kept_us')}); {us(md.get('kernel_eager_us'))}", "—", "—"],
        ["bytes kept per queued `y = x + 1` (tracemalloc), recording on / off",
         f"**{num(md.get('recording_bytes_per_op'), 0)} / {num(md.get('no_recording_bytes_per_op'), 0)} B**",
         "—", "—"],
        ["the first block of a fresh process: opening / 10 matmuls 1000² returned / finished (eager)",
         f"{sec(cold.get('open_s'))} / {ms(cold.get('returned_s'))} / {ms(cold.get('finished_s'), 0)} "
         f"({ms(cold.get('eager_s'), 0)}): return ÷ finish {num(cold.get('ratio'), 2)}",
         f"return < {pct(goal_ratio)} of finish", met(data.get("cold_goal_met"))],
    ]
    out.append(table(["what", "ours", "goal / reference", "verdict"], rows))
    out.append("Why the wall-clock and MLP goals are hard here: frontend and worker are both Python holding the "
               "one interpreter lock, so the frontend's wall time per op is about the sum of the two halves in "
               "the table; and the MLP's frontend spends its own time per step in dispatch and in torch's "
               "module, autograd and optimizer Python, which the perfect-overlap row bounds from below.")
    return "\n\n".join(out)


def parallelism(data: dict, name: str) -> str:
    res = data["results"]
    pinned = data.get("pinned_to")
    extra = (f"Pinned to CPU {', '.join(map(str, pinned))}" if pinned else "Not pinned") + \
        (", beside a busy process on the same CPU" if data.get("busy_competitor") else "") + \
        f"; {data.get('repeat')} repeats, medians of ratios taken within one repeat."
    out = [provenance(data, "bench_parallelism.py", load_text=load(data.get("load_avg")), extra=extra)]
    expect = data.get("expected_modelled", {})
    labels = {"two_devices": "07: two devices (the same products on one device ÷ on two at once)",
              "with_barrier": "07: two devices with a barrier between them",
              "independent_chains": "02: independent chains, 1 worker ÷ 2",
              "dependent_chain": "02: one dependent chain, 1 worker ÷ 2"}
    mod, thr = res.get("modelled", {}), res.get("threads", {})
    rows = []
    for key, label in labels.items():
        op, bound = expect.get(key, ("", None))
        value = dig(mod, f"speedups.{key}")
        ok = None if value is None or bound is None else (value >= bound if op == ">=" else value <= bound)
        rows.append([label, f"**{times(value)}**", f"{op} {bound}×", met(ok), times(dig(thr, f"speedups.{key}"))])
    rows.append(["07: the MLP over two devices, copy time hidden behind compute",
                 pct(mod.get("mlp_copy_time_hidden")), "—", "—", pct(thr.get("mlp_copy_time_hidden"))])
    out.append(table(["lesson", "modelled devices", "expected", "verdict", "threads, same run"], rows))
    out.append("On one core a speed-up of threads is a larger share of the CPU, not parallelism; the "
               "notebooks' checks measure the process's CPU use. Modelled devices: "
               f"{mod.get('device', '')}.")
    return "\n\n".join(out)


def notebooks(data: dict, name: str) -> str:
    rows_in = data.get("notebooks", [])
    loads = [r["load_avg_after"][0] for r in rows_in if r.get("load_avg_after")]
    goal = data.get("goal", {})
    out = [provenance(data, "bench_notebooks.py", load_text=f"{span(loads, lambda x: num(x, 1))} after each notebook",
                      extra=f"{data.get('what', '')}; {data.get('mode', '')} mode.")]
    rows = []
    for r in rows_in:
        checks = [f"{r['held']} ✔"] if r.get("held") else []
        if r.get("failed_explained"):
            checks.append(f"{r['failed_explained']} ✘ explained")
        if r.get("cant_tell"):
            checks.append(f"{r['cant_tell']} ?")
        modelled = sum(1 for c in r.get("checks", []) if c.get("role") == "modelled")
        if modelled:
            checks.append(f"{modelled} ◇")
        if r.get("unexplained"):
            checks.append(f"**{r['unexplained']} unexplained**")
        reading = (f"{num(r['reading_minutes'], 1)} min, {r.get('concepts', '')} concepts, "
                   f"{pct(r['plumbing_lines'] / max(r['code_lines'], 1))} plumbing"
                   if "reading_minutes" in r else "not measured")
        rows.append([r["notebook"].removesuffix(".ipynb"), sec(r["seconds"], 1), f"{r['peak_rss_mib']} MiB", reading,
                     ", ".join(checks) or "none", str(r.get("check_words", "")),
                     "error: " + r["error"].splitlines()[0] if r.get("error") else met(r.get("within_goal"))])
    within = sum(bool(r.get("within_goal")) for r in rows_in)
    out.append(table(["notebook", "wall time", "peak kernel RSS", "to read", "lesson checks", "check words",
                      "verdict"], rows))
    words = sum(r.get("check_words", 0) for r in rows_in)
    lines = sum(r.get("check_lines", 0) for r in rows_in)
    minutes = sum(r.get("reading_minutes", 0) for r in rows_in)
    out.append(f"Goal: ≤ {sec(goal.get('seconds'), 0)} and ≤ {num(goal.get('peak_rss_bytes', 0) / 2**30, 0)} GiB each "
               f"({within} of {len(rows_in)} within it), held by `tests/test_binder_sized.py`. One sitting: ≤ 20 "
               f"minutes to read each (markdown and printed words at 200 a minute, code lines at 10), ≤ 10 new "
               f"concepts, ≤ 20 % of the code lines plumbing (`scripts/reading_time.py`). In all: "
               f"{num(minutes, 0)} minutes to read, {lines} check lines, {words} words of check text. A ✘ or ? is "
               "a run that could not show the lesson on one shared core; its line says why. The checks of this run "
               "that were not ✔, in their own words:")
    misses = []
    for r in rows_in:
        for c in r.get("checks", []):
            if c.get("holds") is not True and c.get("role") != "modelled":
                mark = "✘" if c.get("holds") is False else "? can't tell"
                misses.append(f"- `{r['notebook'].removesuffix('.ipynb')}` {mark} {c['name']}: "
                              f"{c.get('shown', '').rstrip('.')}. Why: {c.get('otherwise', '')}")
    out.append("\n".join(misses) if misses else "- none")
    return "\n\n".join(out)


def _check_marks(run: dict) -> Counter:
    marks: Counter = Counter()
    for student in run.get("per_student", []):
        for nb in student.get("notebooks", {}).values():
            marks.update(line[0] for line in nb.get("lines", []) if line)
    return marks


#: an example node and class for the arithmetic under the class table: not measurements
NODE_CORES, NODE_GIB, CLASS_SIZE = 8, 32, 200


def klass(data: dict, name: str) -> str:
    classes = data.get("classes", [])
    first, last = (classes[0], classes[-1]) if classes else ({}, {})
    out = [provenance(data, "bench_class.py", load_text=f"{load(first.get('load_before'))} before the first class, "
                      f"{load(last.get('load_after'))} after the last",
                      extra=f"{data.get('what', '')}; JupyterHub on 127.0.0.1, a local-process spawner, {data.get('cpus')} "
                            "CPUs.")]
    solo = dig(data, "capacity.solo_finished_s")
    marks = {(r["students"], r.get("keep_kernels", False)): _check_marks(r) for r in data.get("runs", [])}
    rows = []
    for c in classes:
        keep = c.get("keep_kernels", False)
        m = marks.get((c["students"], keep), Counter())
        checks = ", ".join(f"{m[k]} {k}" for k in ("✔", "?", "✘", "◇") if m[k]) or "none"
        rows.append([c["students"], "kept open" if keep else "closed after each", c.get("notebooks", "—"),
                     sec(c["finished_s_max"], 0), times(c["finished_s_max"] / solo) if solo and not keep else "—",
                     f"{num(c['peak_rss_mib_median'], 0)} / {num(c['peak_rss_mib_max'], 0)} MiB",
                     f"{num(c.get('server_rss_mib_max'), 0)} MiB", c.get("threads_max", "—"),
                     f"{num(c.get('tmp_peak_mib_max'), 1)} MiB", checks,
                     "yes" if c.get("all_ok") else "**no**", c.get("leftover_processes"),
                     f"{load(c.get('load_before'))} → {load(c.get('load_after'))}"])
    out.append(table(["students at once", "kernels", "notebooks each", "slowest student finished", "× one alone",
                      "peak memory per student (median / max)", "server alone", "most threads", "temporary files",
                      "lesson checks", "every check ✔ or explained", "processes left", "load average"], rows))
    plain = [c for c in classes if not c.get("keep_kernels") and c.get("per_notebook")]
    if plain:
        alone, most = plain[0], plain[-1]
        nb_rows = []
        for stem, nb in alone["per_notebook"].items():
            big = most["per_notebook"].get(stem, {})
            kpeak = max((c["per_notebook"].get(stem, {}).get("kernel_peak_rss_mib_max") or 0) for c in plain)
            kidle = max((c["per_notebook"].get(stem, {}).get("kernel_idle_rss_mib_max") or 0) for c in plain)
            nb_rows.append([f"`{stem}`", sec(nb["seconds_median"], 1),
                            f"{sec(big.get('seconds_median'), 1)} / {sec(big.get('seconds_max'), 1)}",
                            f"{num(kpeak, 0)} MiB", f"{num(kidle, 0)} MiB"])
        out.append(f"Per notebook (its kernel: the process and any it starts, e.g. notebook 10's ranks):\n\n" + table(
            ["notebook", "one student alone", f"class of {most['students']}: median / slowest",
             "kernel's peak memory", "kernel's memory once idle (an open tab)"], nb_rows))
    cap = data.get("capacity", {})
    spc, peak = cap.get("students_per_core"), cap.get("peak_rss_mib")
    if spc:
        per_node_cpu = spc * NODE_CORES
        per_node_mem = NODE_GIB * 1024 / peak
        per_node = min(per_node_cpu, per_node_mem)
        heavy = cap.get("heaviest_notebook")
        out.append(f"Measured ({cap.get('mode', 'quick')} mode; {cap.get('rule')}): **{num(spc, 1)} students per core**; "
                   f"at most **{num(peak, 0)} MiB per student** (its server and the kernel of the notebook it runs; "
                   f"the heaviest kernel: `{heavy}`, {num(dig(cap, 'kernel_peak_rss_mib.' + str(heavy)), 0)} MiB); "
                   f"a student who keeps every notebook's kernel open holds "
                   f"{num(cap.get('all_kernels_open_peak_rss_mib'), 0)} MiB at once; at most {cap.get('threads_max')} "
                   f"threads and {num(cap.get('tmp_peak_mib'), 1)} MiB of temporary files per student.")
        out.append(f"Arithmetic from those numbers, not a measurement: a node with {NODE_CORES} cores and {NODE_GIB} GiB "
                   f"holds about {num(per_node_cpu, 0)} students working at once by CPU and {num(per_node_mem, 0)} by "
                   f"memory (at {num(peak, 0)} MiB each), so about {num(per_node, 0)}; {CLASS_SIZE} students working "
                   f"at the same moment need about {math.ceil(CLASS_SIZE / per_node)} such nodes.")
    lectures = data.get("first_lecture", [])
    if lectures:
        lrows = [[r["name"], f"{num(r['pod_start_s'], 0)} s", r["concurrent_spawn_limit"], r["consecutive_failure_limit"],
                  f"{r['ready']} of {r['students']}",
                  f"{sec(r['ready_s_median'], 0)} / {sec(r['ready_s_p95'], 0)} / {sec(r['ready_s_max'], 0)}",
                  r["throttled_students"], f"at {sec(r['hub_exited_at_s'], 0)}" if r.get("hub_exited_at_s") else "no",
                  f"{num(r['hub_peak_rss_mib'], 0)} MiB", sec(r["hub_cpu_s"], 1), sec(r["api_latency_s_p95"], 2)]
                 for r in lectures]
        out.append(f"The first lecture: {lectures[0]['students']} students logging in over "
                   f"{num(lectures[0]['arrive_s'], 0)} s to a real local JupyterHub whose pods are **modelled** (each "
                   "ready a set time after its spawn begins: the pod start column is the model's, not a measurement); "
                   "the hub, its proxy, its spawn limit, its throttling and its failure limit are real "
                   "(`deploy/jupyterhub/first_lecture.py`):\n\n" + table(
                       ["scenario", "pod start (modelled)", "concurrentSpawnLimit", "consecutiveFailureLimit",
                        "ready", "arrival to ready: median / 95th pct / slowest", "students told 429",
                        "hub exited", "hub's peak memory", "hub's CPU", "hub API latency (95th pct)"], lrows))
    return "\n\n".join(out)


def distributed(data: dict, name: str) -> str:
    cmd = data.get("command") or " ".join(["python benchmarks/bench_distributed.py", *data.get("argv", [])])
    out = [provenance({**data, "command": cmd}, "bench_distributed.py",
                      load_text=f"{load(data.get('load_avg_before'))} before, {load(data.get('load_avg_after'))} after",
                      extra=f"{data.get('note', '')}.")]
    a, b = data["after_backward"], data["bucketed"]
    rows = [[f"data-parallel step, {data.get('ranks')} {data.get('backend')} ranks, {data.get('model')} "
             f"({num(data.get('gradients_mb'), 1)} MB of gradients, buckets of {num(data.get('bucket_cap_mb'), 1)} MB): "
             f"all-reduce after backward / DDP-bucketed, median step (IQR), {a.get('steps')} steps each",
             f"{ms(a['median_ms'] / 1e3)} ({num(a['q1_ms'])}–{num(a['q3_ms'])}) / {ms(b['median_ms'] / 1e3)} "
             f"({num(b['q1_ms'])}–{num(b['q3_ms'])}): {times(data.get('ratio_after_over_bucketed'))}"],
            ["share of the bucketed communication hidden behind gradient compute (median)",
             pct(data.get("hidden_fraction_bucketed_median"))],
            ["a launch: the first (starts the fork server) / later ones",
             f"{sec(data.get('cold_launch_s'), 1)} / {sec(data.get('warm_launch_s'))}"],
            ["usable CPUs; spare before / after; busy threads (2 per gloo rank)",
             f"{num(data.get('usable_cpus'), 0)}; {num(data.get('spare_cpus_before'), 1)} / "
             f"{num(data.get('spare_cpus_after'), 1)}; {data.get('busy_threads')}"]]
    out.append(table(["what", "ours"], rows))
    out.append("With fewer spare cores than busy threads the ranks' compute and gloo threads share the CPUs, so "
               "bucketing cannot shorten a step here; notebook 10's checks say which case a run was.")
    return "\n\n".join(out)


def trace(data: dict, name: str) -> str:
    goals = data.get("goals", {})
    lo = data.get("load_average_1min", {})
    out = [provenance(data, "bench_trace.py", load_text=f"{load(lo.get('before'))} before, {load(lo.get('after'))} after",
                      extra="Each job in a fresh child process; medians.")]
    a = data.get("a100", {})
    raw_events = dig(data, "json.json.events")
    rows = [[f"load `a100_training_step.json.gz` ({num(raw_events, 0)} events in the file, "
             f"{num(dig(a, 'ours.runs', [{}])[0].get('events'), 0)} kept) + "
             "queue-length summary: ours / HolisticTraceAnalysis 0.5.0, alternating",
             f"**{sec(dig(a, 'ours.median_s'))}** / {sec(dig(a, 'hta.median_s'))}: {times(a.get('speedup'), 1)} wall, "
             f"{times(a.get('speedup_cpu'), 1)} CPU", f"≥ {times(goals.get('a100_speedup_vs_hta'), 0)} HTA",
             met(dig(data, "meets.a100_speedup"))]]
    for key, label in (("large", "CUDA-style"), ("large_rocm", "ROCm-style (hex string stream ids)")):
        f, o = data.get(f"{key}_file", {}), dig(data, f"{key}.ours", {})
        if not o:
            continue
        rows.append([f"load + summary of a generated {num(f.get('mb'), 0)} MB Kineto trace "
                     f"({num(f.get('events'), 0)} events), {label}: wall, peak RSS (CPU)",
                     f"**{sec(o.get('median_s'))}, {num(o.get('median_peak_mb'), 0)} MB** ({sec(o.get('median_cpu_s'))} CPU)",
                     f"≤ {sec(goals.get('large_s'), 0)}, ≤ {num(goals.get('large_peak_mb'), 0)} MB",
                     met(dig(data, f"meets.{key}_s") and dig(data, f"meets.{key}_peak_mb"))])
    out.append(table(["what", "ours", "goal", "verdict"], rows))
    decoders = data.get("json", {})
    if decoders:
        drows = [[f"`{k}`", v.get("skipped", f"{sec(v.get('total_s'))}, +{num(v.get('added_mb'), 0)} MB, "
                                          f"{num(v.get('events'), 0)} events")] for k, v in decoders.items()]
        out.append("The JSON decoders the reader could use, on the same A100 trace (the reader uses msgspec, typed):")
        out.append(table(["decoder", "time, memory added"], drows))
    return "\n\n".join(out)


def figures(data: dict, name: str) -> str:
    tg = data.get("targets", {})
    out = [provenance(data, "bench_figures.py", load_text=load(data.get("load_average_1min_before")) + " before",
                      extra=f"{data.get('repeat')} builds each, medians.")]
    rows = []
    for inp, row in data.get("inputs", {}).items():
        for fig in ("plot_timeline", "plot_queue_length"):
            m = row.get(fig)
            if m:
                ok = m["median_s"] <= tg.get("build_s", math.inf) and m["json_mb"] <= tg.get("json_mb", math.inf)
                rows.append([f"`{fig}`", f"`{inp}` ({num(row.get('events'), 0)} events)", sec(m["median_s"]),
                             f"{num(m['json_mb'], 1)} MB", met(ok)])
    out.append(table(["figure", "input", "build (median)", "`fig.to_json()`", "verdict"], rows))
    out.append(f"Goal: ≤ {sec(tg.get('build_s'), 0)} and ≤ {num(tg.get('json_mb'), 0)} MB each.")
    return "\n\n".join(out)


def dashboards(data: dict, name: str) -> str:
    lo = data.get("load_average_1min", {})
    out = [provenance(data, "bench_dashboards.py", load_text=f"{load(lo.get('before'))} before, {load(lo.get('after'))} after",
                      extra=f"{data.get('benchmark', '')}; {data.get('repeat')} changes each.")]
    rows = []
    for dname, d in data.get("dashboards", {}).items():
        if "error" in d:
            rows.append([f"`{dname}`", "—", f"error: {d['error']}", "—", "**missed**"])
            continue
        rows.append([f"`{dname}`", f"`{d['control']}`", sec(d["median_s"]), sec(d["max_s"]), met(d.get("within_target"))])
    out.append(table(["dashboard", "control changed", "slider change → figure updated (median)", "slowest", "verdict"],
                     rows))
    out.append(f"Goal: ≤ {sec(data.get('target_s'), 1)} (median).")
    return "\n\n".join(out)


def torch_versions(data: dict, name: str) -> str:
    v = data.get("verdict", {})
    out = ["The package's torch-facing tests (the command below) on each torch, each in its own virtual "
           "environment, CPU only: PyPI's Linux wheels are CUDA builds, run here without a GPU, so the GPU tests skip. "
           "The last run of each version:",
           f"Machine: {data.get('machine', '')}. Newest torch on PyPI when it ran: "
           f"{v.get('newest_torch_on_pypi', 'not recorded')}."]
    rows = []
    for ver in data.get("versions", []):
        runs = ver.get("runs", [])
        last = runs[-1] if runs else {}
        commit = (last.get("commit") or "")[:7] or "—"
        rows.append([ver.get("torch"), ver.get("python"), dig(ver, "install.from", ""), len(runs), commit,
                     last.get("date", "—"), num(last.get("passed"), 0), num(last.get("failed", 0), 0),
                     num(last.get("skipped"), 0),
                     sec(last.get("seconds"), 0), load(last.get("load_avg_before"))])
    out.append(table(["torch", "Python", "installed from", "runs", "last run on", "date", "passed", "failed",
                      "skipped", "seconds", "load before"], rows))
    cmds = {r.get("command") for ver in data.get("versions", []) for r in ver.get("runs", [])[-1:]}
    if cmds:
        out.append("Each last run: " + "; ".join(f"`{c}`" for c in sorted(c for c in cmds if c)) + ".")
    if v.get("final_runs"):
        out.append(f"The JSON's verdict on those runs: {v['final_runs']}.")
    return "\n\n".join(out)


def test_suite(data: dict, name: str) -> str:
    runs = data.get("runs", {})  # benchmarks/bench_test_suite.py: "<tier>/<setting>" -> runs
    out = [f"Each run from a fresh clone ({data.get('what')}); machine: {data.get('machine')}. "
           "Measured with " + "; ".join(f"`{c}`" for c in data.get("commands", {}).values()) + "."]
    every = [r for key in sorted(runs) for r in runs[key]]
    rows = [[r.get("command"), r.get("setting"), r.get("commit"),
             f"{num(r['load']['min'], 1)}–{num(r['load']['max'], 1)} (mean {num(r['load']['mean'], 1)})",
             f"**{num(r.get('total_s', 0) / 60, 1)} min**", num(r.get("passed", 0), 0), num(r.get("skipped", 0), 0),
             num(r.get("failed", 0) + r.get("errors", 0) + r.get("error", 0), 0), r.get("exit")]
            for r in every]
    out.append(table(["command", "setting", "commit", "load average", "whole command", "passed", "skipped",
                      "failed", "exit"], rows))
    for r in every:
        folders = r.get("by_folder_s")
        if folders:  # pytest --durations: where the time of that run went
            shares = ", ".join(f"`{k}` {num(v / 60, 1)} min" for k, v in folders.items())
            side = (f", summed over its {r['workers']} pytest-xdist workers (they ran side by side)"
                    if r.get("workers", 1) > 1 else "")
            out.append(f"Where the time of `{r.get('command')}` ({r.get('setting')}) went, per test folder (tests "
                       f"over 0.5 s{side}): {shares}.")
    return "\n\n".join(out)


def site_build(data: dict, name: str) -> str:
    out = [f"Command: `{data.get('command')}`. Machine: {data.get('machine')}. Load average: "
           f"{load(data.get('load_avg_before'))} before, {load(data.get('load_avg_after'))} after. "
           f"Source: {data.get('source')}."]
    rows = [["every notebook executed and the site built (Jupyter Book)", f"**{num(data['seconds'] / 60, 1)} min**",
             f"≤ {num(data.get('goal_seconds', 0) / 60, 0)} min"],
            ["pages; plotly figures", f"{data.get('pages')}; {data.get('plotly_figures', '—')}", "—"],
            ["size of the site (plotly.js, once, of it)", f"**{num(data.get('megabytes'), 1)} MB** "
             f"({num(data.get('plotly_js_megabytes'), 1)} MB)", f"≤ {num(data.get('goal_megabytes'), 0)} MB"]]
    out.append(table(["what", "ours", "goal"], rows))
    return "\n\n".join(out)


def outside_oracles(data: dict, name: str) -> str:
    sources = data.get("sources", {})

    def origin(suite: str) -> str:
        src = sources.get("nanogpt" if suite == "interrupt" else suite, {})
        if src.get("commit"):
            return f"commit `{src['commit'][:12]}`"
        return f"version {src['version']}" if src.get("version") else "—"

    pinned = data.get("cpus_allowed")
    out = [provenance(data, "bench_outside_oracles.py",
                      load_text=f"{load(data.get('load_average_before'))} before, "
                                f"{load(data.get('load_average_after'))} after",
                      extra=f"CPUs the run was allowed: {pinned}; torch {data.get('torch')}.")]
    rows = []
    for suite in ("nanogpt", "examples", "d2l"):
        s = dig(data, f"suites.{suite}")
        if s is None:
            rows.append([suite, data.get("skipped", {}).get(suite, "not run"), "—", "—", "—", "—"])
            continue
        rows.append([suite, origin(suite), num(s.get("runs"), 0), f"**{num(s.get('bitwise_equal'), 0)}**",
                     f"{num(s.get('controls_detected'), 0)} of {num(s.get('controls'), 0)}",
                     sec(s.get("seconds"), 0)])
    out.append(table(["suite", "outside code", "runs", "bitwise eager's", "one-ulp controls found", "seconds"], rows))
    mismatches = [m for suite in ("nanogpt", "examples", "d2l")
                  for m in dig(data, f"suites.{suite}.mismatches", [])]
    for m in mismatches:
        out.append(f"Not eager's: {m.get('case')} ({m.get('build')}, {m.get('workers')} workers): "
                   f"{m.get('error') or m.get('first_difference')}.")
    s = dig(data, "suites.interrupt")
    if s is not None:
        o = s.get("outcomes", {})
        out.append(table(["interrupted nanoGPT", "outside code", "trials", "finished (a state eager passes through)",
                          "raised NotComputedError", "silent", "unclear error", "seconds"],
                         [["real SIGINTs", origin("interrupt"), num(s.get("trials"), 0), num(o.get("finished", 0), 0),
                           num(o.get("raised clearly", 0), 0), f"**{num(s.get('silent'), 0)}**",
                           num(s.get("unclear_error"), 0), sec(s.get("seconds"), 0)]]))
    return "\n\n".join(out)


def generic(data: Any, name: str) -> str:
    """Any other result file: what it says it is, and every number in it (up to a screenful)."""
    flat: list[tuple[str, Any]] = []

    def walk(x: Any, path: str) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(x, list):
            for i, v in enumerate(x[:20]):
                walk(v, f"{path}[{i}]")
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            flat.append((path, x))

    walk(data, "")
    head = [f"{data.get('what') or data.get('benchmark') or ''}".strip()] if isinstance(data, dict) else []
    if isinstance(data, dict) and data.get("command"):
        head.append(f"Command: `{data['command']}`.")
    head.append("This page has no table for this file yet; its numbers as recorded:")
    rows = [[f"`{p}`", num(v, 4 if isinstance(v, float) else 0)] for p, v in flat[:60]]
    more = f"\n\n(and {len(flat) - 60} more)" if len(flat) > 60 else ""
    return "\n\n".join([" ".join(h for h in head if h), table(["field", "value"], rows)]) + more


def claims(data: dict, name: str) -> str:
    """benchmarks/bench_claims.py: every headline claim's ✔ rate, quiet and beside busy processes."""
    conds = [c for c in data.get("conditions", []) if "busy_processes" in c]
    conds.sort(key=lambda c: (c.get("busy_processes", 0), str(c.get("pinned"))))
    out = ["Every headline claim of the registry (`d2l_async/claims.py`), the plain-PyTorch ones included, run as "
           "its notebook runs it in default mode. Target: on a 2-core machine at load ≤ 4, ✔ in at least 4 of 5 "
           "runs, or its notebook stops stating it; ◇ is a modelled illustration (never evidence)."]
    for c in conds:
        out.append(f"- **{c.get('condition')}**: {c.get('runs')} runs, load average {num(c.get('load_avg_min'), 1)}–"
                   f"{num(c.get('load_avg_max'), 1)} (median {num(c.get('load_avg_median'), 1)}), {c.get('when', '')[:16]}, "
                   f"{c.get('machine')}" + (f"; groups that raised: {', '.join(c['errors'])}" if c.get("errors") else "")
                   + (f"; **no row for** {', '.join(c['missing'])}" if c.get("missing") else ""))
    keys = sorted({k["claim"] for c in conds for k in c.get("claims", [])})
    rows = []
    for key in keys:
        row, sentence = [f"`{key}`"], ""
        for c in conds:
            k = next((k for k in c.get("claims", []) if k["claim"] == key), None)
            if k is None:
                row.append("not run")
                continue
            sentence = k.get("name") or re.sub(r"\{[^}]+\}", "…", k.get("sentence", sentence))
            marks = f"{k['holds']} ✔ · {k['fails']} ✘ · {k['unsure']} ? · {k['modelled']} ◇"
            causes = ", ".join(f"{n}× {cause}" for cause, n in sorted(k.get("causes", {}).items()))
            row.append(marks + (f" ({causes})" if causes else ""))
        rows.append([row[0], sentence, *row[1:]])
    out.append(table(["claim", "sentence", *(c.get("condition", "") for c in conds)], rows))
    return "\n\n".join(out)


# -- the page ------------------------------------------------------------------------------------------------

#: result file (or its prefix) -> (heading, renderer, what the reader learns from it)
SECTIONS: list[tuple[str, str, Callable[[Any, str], str], str]] = [
    ("engine.json", "The CPU engine", engine,
     "The book's benchmark on the dependency engine, what recording costs, and whether the frontend keeps running "
     "while the backend computes."),
    ("torch_async.json", "Plain PyTorch in `asynchronous()`", torch_async,
     "Unmodified torch code queued for a worker thread (a virtual device, not a GPU)."),
    ("parallelism.json", "Modelled devices and threads on one busy core", parallelism,
     "The device lessons of notebooks 02 and 07, pinned to one CPU beside a busy process."),
    ("notebooks.json", "Every notebook as a Binder reader runs it", notebooks,
     "Default mode, each notebook pinned to one CPU beside a busy process on that CPU."),
    ("class.json", "A class on JupyterHub", klass,
     "Simulated students on a real local JupyterHub, each running every notebook in the mode "
     "`deploy/jupyterhub/config.yaml` sets."),
    ("distributed.json", "Beyond one process (notebooks 10 and 10b)", distributed,
     "Data-parallel training on local gloo ranks."),
    ("trace.json", "Reading profiler traces", trace, "Loading torch.profiler traces and their queue-length summary."),
    ("figures.json", "Figures", figures, "Building the two largest figures."),
    ("dashboards.json", "Dashboards", dashboards, "A control changed, the experiment rerun, the figure updated in place."),
    ("torch_versions.json", "The torch version matrix", torch_versions,
     "The torch-facing tests on each tested torch, each in its own virtual environment."),
    ("outside_oracles.json", "Other projects' training code, eager vs `asynchronous()`", outside_oracles,
     "nanoGPT's train.py, pytorch/examples' word_language_model and mnist, the d2l package's classes, each run "
     "eagerly and in a block (1 and 2 workers), every tensor compared bitwise; real SIGINTs in the nanoGPT loop."),
    ("claims.json", "How often each headline claim holds", claims,
     "Every headline claim, run five times in default mode, as is and beside two busy processes."),
    ("test_suite.json", "`make test` and `make test-fast`", test_suite, "The test tiers from a fresh clone."),
    ("site_build.json", "The static site (`make site`)", site_build, "The chapter built as a web site."),
]


def _result_files(results: Path) -> list[Path]:
    return sorted(p for p in results.glob("*.json"))


def render(results: Path = RESULTS) -> str:
    files = {p.name: p for p in _result_files(results)}
    lines = [
        "# Measured numbers",
        "",
        "<!-- Generated by scripts/numbers_page.py from benchmarks/results/*.json: do not edit by hand. -->",
        "",
        "Every number on this page is read from a JSON file in `benchmarks/results/`, written by the benchmark "
        "script named beside it (`make benchmarks` runs them all, one at a time). The page is generated by "
        "`python scripts/numbers_page.py` (`make docs`), and a test fails when it is older than the JSON. They are "
        "CPU numbers from the machine each section names, with no GPU: virtual and modelled devices, never GPU "
        "numbers. On a shared machine microsecond timings move with the load, so each section says the load "
        "average its run recorded; the notebooks do not promise such numbers, their lesson checks report them "
        "with the machine's load.",
        "",
    ]
    done: set[str] = set()
    for filename, heading, renderer, intro in SECTIONS:
        if filename in files:
            data = json.loads(files[filename].read_text())
            lines += [f"## {heading}", "", f"{intro} (`benchmarks/results/{filename}`)", "", renderer(data, filename), ""]
            done.add(filename)
        if filename in ("engine.json", "outside_oracles.json"):  # the same script's other runs, beside other work
            stem = filename.removesuffix(".json")
            for other in sorted(n for n in files if n.startswith(stem + "_") and n.endswith(".json")):
                data = json.loads(files[other].read_text())
                lines += [f"### The same script, another run: `{other}`", "", renderer(data, other), ""]
                done.add(other)
    for other in sorted(set(files) - done):
        lines += [f"## `{other}`", "", generic(json.loads(files[other].read_text()), other), ""]
    lines += ["## GPU numbers", ""]
    gpu = sorted(n for n in files if n.startswith("gpu"))
    lines.append("The GPU results are listed above: " + ", ".join(f"`{n}`" for n in gpu) + "." if gpu else
                 "No GPU result file in `benchmarks/results/`: `make gpu-check` on a CUDA machine writes "
                 "`build/gpu/gpu_numbers.json` (see [GPU checks](gpu.md)); copied here, it is listed on this page.")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT, help="where to write the page (default docs/numbers.md)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when the page differs")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python scripts/numbers_page.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
