"""The one-core test: every notebook, quick mode, pinned to one CPU beside a busy process.

That is roughly what a Binder reader gets (about one shared CPU).  A notebook fails when a cell
errors, when it holds no lesson check (:mod:`d2l_async.lesson`), when a check is a ✘ without its
explanation, when the profiler's progress lines leak to its stderr, when two of its checks contradict
each other (a speed-up credited where the machine verdict says none can show), when a check sets one
time against another without deciding it against the run's spread, or when an explanation contradicts
the numbers beside it (:mod:`tests.one_core.rules`: a can't-tell that states an outcome, a ratio
printed both ways, a ✔ about time with no spread rule or gate, a garbled spread, a growth not decided
by the trend rule), when a check names no declared claim of the notebook (:mod:`d2l_async.claims`), a ✘ or ?
gives no cause or a line runs past 40 words, or when the executed notebook takes more than 20 minutes to read
(:mod:`tests.one_core.reading`).  The rules read the checks' metadata only: a reader's own ``print`` never
fails a notebook.  Each notebook's checks are printed (``pytest -s`` shows them), so a ✘ with its reason is
visible in the log.
"""

from __future__ import annotations

import os

import pytest

from . import reading
from .pinned import NOTEBOOKS, analyse, busy_neighbour, pinned, run_pinned

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")


def _the_run(path):
    """The notebook's run of this ``make test`` (nbval's, kept by tests/notebook_run.py), else one made now the
    same way (pinned, quick mode, a busy neighbour): each notebook executes once per test run."""
    from tests.notebook_run import executed

    try:
        nb, facts = executed(path.name)
    except FileNotFoundError:
        return run_pinned(path, quick=True, busy=True, timeout=900)
    if not facts.get("quick"):
        return run_pinned(path, quick=True, busy=True, timeout=900)
    return analyse(nb, path.name, seconds=facts["seconds"], cpu=facts["cpu"], busy=facts["busy"],
                   affinity=tuple(facts["affinity"]), peak_rss_bytes=facts["peak_rss_bytes"],
                   error=f"cells {facts['failed_cells']} failed" if facts.get("failed_cells") else "")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_on_one_busy_core(path):
    run = _the_run(path)
    print(f"\n{run.name}: {run.seconds:.1f} s on CPU {run.cpu} beside a busy process, "
          f"peak kernel RSS {run.peak_rss_bytes / 2**20:.0f} MiB")
    for c in run.checks:
        print("   ", c.text)
    assert not run.error, f"{run.name}: a cell failed on one busy core:\n{run.error}"
    assert run.affinity == (run.cpu,), f"{run.name}: the kernel was not pinned (affinity {run.affinity})"
    assert run.checks, (f"{run.name} holds no lesson check: state what this run should show with "
                        "d2l_async.lesson.expect(name, holds, shown=..., otherwise=...)")
    bad = [c.text for c in run.unexplained]
    assert not bad, f"{run.name}: a ✘ without its explanation (give otherwise=...): {bad}"
    assert not run.kineto_lines, f"{run.name}: profiler progress lines leaked to stderr: {run.kineto_lines[:2]}"
    clash = [(m.text, s.text) for m, s in run.contradictions]
    assert not clash, (f"{run.name}: a check credits a speed-up that the machine verdict says this machine cannot "
                       f"show: {clash}")
    undecided = [c.text for c in run.undecided_comparisons]
    assert not undecided, (f"{run.name}: a check compares times without deciding against the run's spread "
                           f"(use d2l_async.verdict.compare/trend as holds): {undecided}")
    words = [str(p) for p in run.word_problems]
    assert not words, f"{run.name}: an explanation contradicts the numbers it shows: {words}"
    registry = [str(p) for p in run.claim_problems]
    assert not registry, f"{run.name}: a check outside the claim registry, without its cause, or too long: {registry}"
    s = reading.stats(path, run.notebook)
    print(f"    {s.minutes:.1f} min to read ({s.markdown_words} + {s.printed_words} words, {s.code_lines} code lines), "
          f"{s.check_lines} check lines, {s.check_words} words")
    assert s.minutes <= reading.MAX_MINUTES, f"{run.name}: {s.minutes:.1f} minutes to read, more than one sitting"
    check_figures(run)


def _rules():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "viz" / "figure_rules.py"
    spec = importlib.util.spec_from_file_location("figure_rules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Figures of the notebooks run in this session, rendered together by the last test of this module.
FIGURES: dict[str, list[dict]] = {}


def check_figures(run) -> None:
    """every figure the notebook drew has its title lines within 900 px, no overlapping text
    labels, and a legend where a timeline has more than one role (estimated from the figure's JSON);
    :func:`test_every_notebook_figure_renders_at_900px` then renders them all with kaleido."""
    rules = _rules()
    bad = {i: p for i, fig in enumerate(run.figures) if (p := rules.problems(fig, width=900))}
    assert not bad, f"{run.name}: figures a student cannot read at a glance: {bad}"
    FIGURES[run.name] = list(run.figures)


def test_pinning_and_the_busy_neighbour_are_real():
    """The harness itself: children inherit the one CPU, and the neighbour dies with the block."""
    import subprocess
    import sys

    cpu = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    with pinned(cpu), busy_neighbour() as busy:
        child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                               capture_output=True, text=True, timeout=60)
        assert child.stdout.strip() == f"[{cpu}]"
        assert os.sched_getaffinity(busy.pid) == {cpu}
        assert busy.poll() is None  # spinning
    assert busy.poll() is not None  # killed on leaving the block
    assert os.sched_getaffinity(0) == before


def test_the_harness_sees_what_it_must_fail_on(tmp_path):
    """A ✘ without its reason, a profiler line on stderr, a cell error: each is reported."""
    import nbformat

    def notebook(name, *sources):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
        path = tmp_path / name
        nbformat.write(nb, path)
        return path

    bad = run_pinned(notebook("bad.ipynb",
                              "from d2l_async import lesson\nlesson.expect('claim', False, shown='1 vs 2')",
                              "import sys\nprint('USDT:2026-01-01 00:00:00 1:1 X.cpp:1] profiler_start', "
                              "file=sys.stderr)"), busy=False, timeout=120)
    assert not bad.error and len(bad.checks) == 1 and len(bad.unexplained) == 1
    assert len(bad.kineto_lines) == 1 and bad.affinity == (bad.cpu,)
    broken = run_pinned(notebook("broken.ipynb", "1 / 0"), busy=False, timeout=120)
    assert "ZeroDivisionError" in broken.error and not broken.checks
    # a speed-up credited against the machine verdict, and a comparison of times decided
    # from one number each, are both seen
    clash = run_pinned(notebook("clash.ipynb",
                                "from d2l_async import lesson\n"
                                "lesson.expect('a spare core per rank', False, shown='1 CPU', otherwise='one CPU', "
                                "role='machine')\n"
                                "lesson.expect('overlap shortens the step', 1.0 < 2.0, shown='1.0 ms vs 2.0 ms', "
                                "role='speed-up')",
                                "from d2l_async import lesson\n"
                                "print('item     waited  130.07 ms   <cell>:8')\n"
                                "print('item     waited  405.80 ms   <cell>:10')\n"
                                "lesson.expect('syncing costs time', None, shown='never 1.6 s, synced 2.8 s', "
                                "otherwise='here syncing bought memory at no cost in time')\n"
                                "lesson.expect('each blocker waited', True, shown='item 405.8 ms')"),
                       busy=False, timeout=120)
    assert not clash.error and len(clash.contradictions) == 1
    assert [c.name for c in clash.undecided_comparisons] == ["overlap shortens the step"]
    # an explanation against its numbers, read from the stored checks; checks outside the registry
    assert {p.rule for p in clash.word_problems} >= {"unsure-claims-an-outcome", "times-compared-undecided"}
    assert {p.rule for p in clash.claim_problems} >= {"no-claim", "no-cause"}


def test_a_lecturers_own_print_never_fails_a_notebook(tmp_path):
    """A lecturer adds a line of their own beside a chapter check: the rules read checks' metadata only."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from d2l_async.experiments import ran_ahead_check, run_asynchrony\n"
        "r = run_asynchrony(size=64, matmuls=2, repeat=2, backend='engine')\n"
        "print(f\"ours {r.synced.median / r.naive.median:.2f}x vs the book's 3.4x\")\n"
        "print('✔ my own claim: 1.0 ms vs 2.0 ms')\n"
        "ran_ahead_check(r.trace, r.machine)")])
    path = tmp_path / "00_lecture.ipynb"
    nbformat.write(nb, path)
    run = run_pinned(path, busy=False, timeout=300)
    assert not run.error, run.error
    assert [c.claim for c in run.checks] == ["00.ran-ahead"]  # the printed "✔ ..." line is not read as a check
    assert run.word_problems == [] and run.undecided_comparisons == ()
    assert [p.rule for p in run.claim_problems] == ["claim-of-another-notebook"]  # 00_lecture is not 00_tour


@pytest.mark.parametrize("shown, compares", [
    ("1.0 ms vs 2.0 ms", True), ("30.0 µs/op synchronous vs 12.0 µs/op asynchronous", True),
    ("next useful statement after 1.00 ms with z.wait_to_read() vs 9.00 ms with waitall()", True),
    ("peak 1.2 MiB never vs 3 MiB", False), ("z.item() returned after 3 ms; synchronize() after 9 ms", False)])
def test_a_comparison_of_times_is_recognised(shown, compares):
    from d2l_async import lesson

    from .pinned import compares_times

    assert compares_times(lesson.check("x", True, shown=shown)) is compares


@pytest.mark.timeout(600)
def test_every_notebook_figure_renders_at_900px(tmp_path):
    """Every figure the notebooks above drew, rendered with kaleido in the tests' Chromium to a 900 px
    PNG (one browser for all, after the busy neighbour is gone)."""
    import struct

    from tests.conftest import CHROMIUM, skip_or_fail

    if not FIGURES:
        pytest.skip("no notebook of this session drew a figure (run the notebook tests first)")
    if not os.path.exists(CHROMIUM):
        skip_or_fail(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    pytest.importorskip("kaleido", reason="kaleido>=1 is in the dev extra: pip install -e .[dev]")
    import plotly.graph_objects as go
    import plotly.io as pio

    os.environ.setdefault("BROWSER_PATH", CHROMIUM)
    figs, files = [], []
    for name, figures in FIGURES.items():
        for i, f in enumerate(figures):
            figs.append(go.Figure(f))
            files.append(tmp_path / f"{name}-{i}.png")
    heights = [int(f.layout.height or 500) for f in figs]
    pio.write_images(figs, files, width=900, height=heights, scale=1)
    missing = [k for k, f in enumerate(files) if not f.exists()]
    for k in missing:  # a browser slowed by other work can drop one: try each again on its own
        pio.write_image(figs[k], files[k], width=900, height=heights[k], scale=1)
    for f in files:
        assert f.exists(), f"{f.name}: kaleido wrote no PNG"
        head = f.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">I", head[16:20])[0] == 900, f.name
