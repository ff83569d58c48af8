"""Render every figure of d2l_async.viz to build/figures/ (PNG via kaleido, HTML for animations).

Run with ``make figures`` (or ``.venv/bin/python scripts/make_figures.py [--out DIR] [--only NAME]``).
``--notebooks [STEM ...]`` instead executes the notebooks (quick mode unless ``--default-mode``) and
writes every figure they draw, as a student sees it, to ``OUT/notebooks/<stem>-<k>.png`` beside its
JSON, then prints what each figure rule of ``tests/viz/figure_rules.py`` finds (``--rules-only``
re-checks JSON written before, without running anything).
PNGs are written by kaleido >= 1 (the ``dev`` extra), which drives a Chrome or Chromium already on
the machine: ``$BROWSER_PATH`` if set, else Debian's ``/usr/bin/chromium`` when it exists, else
whatever kaleido finds (``kaleido_get_chrome`` downloads one).
The inputs are the engine's ``z = x * y + 2``, a 10,000-increment engine run and the shipped V100
training-step trace.  Animated figures are also saved as PNGs of a frame part-way through, so
their states can be checked by eye.  When the engine is not importable, the engine inputs are
replaced by a clearly labelled synthetic trace.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import time
from pathlib import Path

if "BROWSER_PATH" not in os.environ and os.path.exists("/usr/bin/chromium"):
    os.environ["BROWSER_PATH"] = "/usr/bin/chromium"  # kaleido's choreographer reads it

import numpy as np  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import plotly.io as pio  # noqa: E402

from d2l_async import viz  # noqa: E402
from d2l_async.trace import Event, Lane, LaneRole, Trace  # noqa: E402


def synthetic_engine_trace(n_ops: int, *, label: str) -> Trace:
    """An engine-like recording (one frontend, one virtual worker) for when the engine is missing."""
    rng = np.random.default_rng(0)
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", True, 0)]
    ev, t, free = [], 0.0, 0.0
    for i in range(n_ops):
        push = t
        t += 3e-6
        ev.append(Event("frontend", "launch", "push add", push, t, source="line 3: a += 1"))
        s = max(free, t)
        free = s + 8e-6 * rng.uniform(1, 1.5)
        ev.append(Event("cpu:0 worker 0", "op", "add", s, free, issue=push, device="cpu:0", reads=("a",),
                        writes=("a",), nbytes=4))
    ev.append(Event("frontend", "block", "wait_to_read", t, free, reason="print", source="line 4: print(a)"))
    return Trace.from_events(ev, lanes=lanes, meta={"source": "synthetic", "virtual": True,
                                                    "device": f"SYNTHETIC {label} (engine not available)"})


def engine_traces() -> dict[str, Trace]:
    """``z = x * y + 2`` and 10,000 increments, recorded by the engine (or synthetic stand-ins)."""
    try:
        import torch

        from d2l_async.engine import ThreadedEngine

        out = {}
        with ThreadedEngine(workers=1) as eng:
            x = eng.array(torch.ones(1000), name="x")
            y = eng.array(torch.full((1000,), 2.0), name="y")
            z = x * y + 2
            with contextlib.redirect_stdout(io.StringIO()):  # print is the blocker; its line is not the script's output
                print("z[:3] =", z.asnumpy()[:3])  # a blocker: the frontend waits for z
            out["engine_z"] = eng.trace()
        with ThreadedEngine(workers=1) as eng:
            a = eng.array(torch.zeros(1), name="a")
            for _ in range(10_000):
                a += 1
            with contextlib.redirect_stdout(io.StringIO()):
                print("a =", a.asnumpy())  # a blocker: waits for all 10,000 increments
            out["engine_10k"] = eng.trace()
        return out
    except Exception as exc:  # noqa: BLE001 - the engine is optional here; say so loudly
        print(f"engine not usable ({type(exc).__name__}: {exc}); using synthetic engine-like traces", file=sys.stderr)
        return {"engine_z": synthetic_engine_trace(2, label="z = x * y + 2"),
                "engine_10k": synthetic_engine_trace(10_000, label="10,000 increments")}


def measurement_figures() -> dict[str, go.Figure]:
    """Naive vs synchronized timing of work pushed to the engine, and its scheduling overhead."""
    try:
        import torch

        from d2l_async.benchmark import measure
        from d2l_async.engine import ThreadedEngine, measure_scheduling_overhead
    except ImportError as exc:
        print(f"skipping measurement figures: {exc}", file=sys.stderr)
        return {}
    with ThreadedEngine(workers=1) as eng:
        holder = [eng.array(torch.zeros(100, 100), name="a")]

        def push_300_increments() -> None:
            for _ in range(300):
                holder[0] += 1

        naive = measure(push_300_increments, repeat=7, sync=False, label="naive (no sync)")
        eng.waitall(timeout=120)
        synced = measure(push_300_increments, repeat=7, label="synchronized")
    rows = measure_scheduling_overhead(workers=(1, 2, 4), ops=500, repeats=3)
    return {
        "measurements": viz.plot_measurements(
            [naive, synced], title="300 increments pushed to the engine (CPU threads): naive vs synchronized timing"),
        "scheduling_overhead": viz.plot_scheduling_overhead(rows),
    }


def at_frame(fig: go.Figure, k: int) -> go.Figure:
    """A copy of an animated figure showing frame ``k`` (for a still PNG)."""
    out = go.Figure(fig)
    frame = out.frames[k]
    for idx, upd in zip(frame.traces, frame.data):
        out.data[idx].update(upd.to_plotly_json())
    if out.layout.sliders:
        out.layout.sliders[0].active = k
    out.frames = ()
    return out


def render_pngs(figures: dict[str, go.Figure], out: Path, *, width: int = 1400,
                graph_width: int | None = 1100) -> list[Path]:
    """Write one PNG per figure under ``out`` (animated figures: a frame part-way through, plus the
    animation as HTML), with one browser for all of them.  Returns the PNG paths.

    Figures named ``*graph*`` are ``graph_width`` wide (``None``: ``width`` like the others).

    Raises:
        RuntimeError: kaleido >= 1 or a Chrome for it is missing (the message says how to get them).
    """
    try:
        import kaleido  # noqa: F401
    except ImportError as exc:
        raise RuntimeError("PNG export needs kaleido >= 1: pip install -e '.[dev]' (or pip install 'kaleido>=1')") from exc
    out.mkdir(parents=True, exist_ok=True)
    stills, files, widths, heights = [], [], [], []
    for name, fig in figures.items():
        still = fig
        if fig.frames:
            fig.write_html(out / f"{name}.html", include_plotlyjs="directory", auto_play=False)
            still = at_frame(fig, int(len(fig.frames) * 0.6))
        stills.append(still)
        files.append(out / f"{name}.png")
        widths.append(graph_width if graph_width and "graph" in name else width)
        heights.append(int(fig.layout.height or 500))
    todo = list(range(len(files)))
    for attempt in range(2):  # a render that failed is tried once more, alone with the others that did
        try:  # one browser for all
            pio.write_images([stills[i] for i in todo], [files[i] for i in todo], width=[widths[i] for i in todo],
                             height=[heights[i] for i in todo], scale=1)
        except Exception as exc:  # noqa: BLE001 - kaleido's own errors name Chrome; add the fix here
            if "chrome" in f"{type(exc).__name__} {exc}".lower():
                raise RuntimeError(f"kaleido found no usable Chrome ({exc}); install chromium "
                                   "(apt-get install chromium) or set BROWSER_PATH") from exc
            raise
        # plotly drops kaleido's per-figure errors (a render that fails, or takes over kaleido's
        # 90 s on a loaded machine, leaves no file and no exception): look for the files
        todo = [i for i in todo if not files[i].exists()]
        if not todo:
            return files
    names = ", ".join(files[i].name for i in todo)
    raise RuntimeError(f"kaleido wrote no PNG for {names}, twice (a render that fails or takes over 90 s leaves "
                       "none, and plotly reports nothing); run again on a less busy machine")


ROOT = Path(__file__).resolve().parents[1]
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def figure_rules():
    """The figure rules of the test suite (``tests/viz/figure_rules.py``), loaded by path."""
    path = ROOT / "tests" / "viz" / "figure_rules.py"
    spec = importlib.util.spec_from_file_location("figure_rules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def notebook_figures(stems: list[str], *, quick: bool = True, timeout: int = 900) -> dict[str, dict]:
    """Execute each notebook (all of them when ``stems`` is empty) and return every plotly figure it
    drew, as output JSON, named ``<stem>-<k>`` in drawing order (``k`` from 1)."""
    import nbformat
    from nbclient import NotebookClient

    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if stems:
        paths = [p for p in paths if p.stem in stems or p.stem[:2] in stems]
        if not paths:
            raise SystemExit(f"--notebooks {stems} matches no notebook under notebooks/")
    os.environ["D2L_ASYNC_QUICK"] = "1" if quick else "0"
    figures: dict[str, dict] = {}
    for path in paths:
        t0 = time.perf_counter()
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        k = 0
        for cell in nb.cells:
            for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
                fig = (output.get("data") or {}).get(PLOTLY_MIME)
                if fig:
                    k += 1
                    figures[f"{path.stem}-{k}"] = json.loads(fig) if isinstance(fig, str) else dict(fig)
        print(f"{path.stem}: {k} figures in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return figures


def rule_findings(figures: dict[str, dict]) -> dict[str, dict[str, list[str]]]:
    """rule name -> figure name -> that rule's problems (figures without problems left out)."""
    rules = figure_rules()
    found: dict[str, dict[str, list[str]]] = {name: {} for name in rules.RULES}
    for key, fig in figures.items():
        data = rules.as_json(fig)
        for name, rule in rules.RULES.items():
            problems = rule(data)
            if problems:
                found[name][key] = problems
    return found


def print_findings(found: dict[str, dict[str, list[str]]], n_figures: int) -> int:
    """Print the findings per rule; return the number of problems."""
    total = 0
    print(f"figure rules on {n_figures} figures:")
    for name, per_fig in found.items():
        n = sum(len(v) for v in per_fig.values())
        total += n
        print(f"  {name}: {n} problem(s) in {len(per_fig)} figure(s)")
        for key, problems in per_fig.items():
            for problem in problems:
                print(f"    {key}: {problem}")
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/figures")
    parser.add_argument("--only", default="", help="substring of the figure names to render")
    parser.add_argument("--notebooks", nargs="*", default=None, metavar="STEM",
                        help="execute these notebooks (stems or two-digit numbers; none: all) and render their figures")
    parser.add_argument("--default-mode", action="store_true", help="with --notebooks: default, not quick, mode")
    parser.add_argument("--rules-only", action="store_true",
                        help="with --notebooks: check the figure JSON already under OUT/notebooks/, run nothing")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.notebooks is not None:
        folder = out / "notebooks"
        folder.mkdir(exist_ok=True)
        if args.rules_only:
            figures = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
            figures = {k: v for k, v in figures.items() if not args.notebooks or k.split("-")[0] in args.notebooks
                       or k[:2] in args.notebooks}
        else:
            figures = notebook_figures(args.notebooks, quick=not args.default_mode)
            for key, fig in figures.items():
                (folder / f"{key}.json").write_text(json.dumps(fig))
            stills = {k: go.Figure(v) for k, v in figures.items() if not args.only or args.only in k}
            files = render_pngs(stills, folder, width=900, graph_width=None)  # a notebook cell's width
            print(f"{len(files)} PNGs under {folder}/")
        print_findings(rule_findings(figures), len(figures))
        return 0

    from d2l_async.data import load_sample

    traces = engine_traces()
    traces["v100"] = load_sample("v100_training_step")
    figures: dict[str, go.Figure] = {}
    for key, tr in traces.items():
        figures[f"{key}_timeline"] = viz.plot_timeline(tr)
        figures[f"{key}_queue"] = viz.plot_queue_length(tr, in_flight=True, memory=True)
        figures[f"{key}_trace"] = viz.plot_trace(tr)
        figures[f"{key}_blocked"] = viz.plot_blocked_time(tr)
        figures[f"{key}_animated"] = viz.animate_timeline(tr)
        figures[f"{key}_graph"] = viz.plot_dependency_graph(tr)
    figures["expression_graph"] = viz.plot_dependency_graph("z = x * y + 2")
    figures.update(measurement_figures())
    t0 = time.perf_counter()
    files = render_pngs({k: f for k, f in figures.items() if not args.only or args.only in k}, out)
    print(f"{len(files)} PNGs in {time.perf_counter() - t0:.1f} s under {out}/")
    for f in files:
        print(" ", f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
