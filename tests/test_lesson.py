from __future__ import annotations

import subprocess
import sys

import pytest

from d2l_async import lesson
from d2l_async.lesson import FAILS, HOLDS, METADATA_KEY, Check


def test_check_holds_renders_mark_name_and_numbers():
    c = lesson.check("X is faster", 1.0 < 2.0, shown="1.0 ms vs 2.0 ms")
    assert c == Check("X is faster", True, "1.0 ms vs 2.0 ms", "")
    assert c.text == f"{HOLDS} X is faster: 1.0 ms vs 2.0 ms"
    assert "Why" not in c.text
    assert c.explained


def test_failed_check_carries_its_why():
    c = lesson.check("X is faster", 3.0 < 2.0, shown="3.0 ms vs 2.0 ms", otherwise="one busy CPU")
    assert not c.holds
    assert c.text == f"{FAILS} X is faster: 3.0 ms vs 2.0 ms \u2014 Why: one busy CPU"
    assert c.explained
    assert "<i>Why:</i> one busy CPU" in c._repr_html_()


def test_failed_check_without_why_is_marked_unexplained():
    c = lesson.check("X is faster", False, shown="3 vs 2")
    assert not c.explained
    assert "no explanation" in c.text
    # a holding check needs no explanation
    assert lesson.check("X", True, shown="1").explained


def test_numpy_bools_are_accepted():
    np = pytest.importorskip("numpy")
    c = lesson.check("bigger", np.float64(2.0) > 1.0, shown="2 > 1")
    assert c.holds is True


@pytest.mark.parametrize("holds", [1, 0.0, "yes"])
def test_holds_must_be_a_bool(holds):
    with pytest.raises(TypeError, match="holds must be a bool"):
        lesson.check("claim", holds, shown="1 vs 2")


@pytest.mark.parametrize("name, shown", [("", "1"), ("  ", "1"), ("claim", ""), ("claim", "  ")])
def test_empty_name_or_numbers_are_refused(name, shown):
    with pytest.raises(ValueError):
        lesson.check(name, True, shown=shown)


def test_html_is_escaped():
    c = lesson.check("a <b> claim", True, shown="x < y & z")
    assert "<b>a &lt;b&gt; claim</b>" in c._repr_html_()
    assert "x &lt; y &amp; z" in c._repr_html_()


def test_expect_prints_one_line_outside_ipython(capsys):
    c = lesson.expect("queue stays bounded", True, shown="max 4 ops")
    assert capsys.readouterr().out == f"{HOLDS} queue stays bounded: max 4 ops\n"
    assert isinstance(c, Check)


def test_show_accepts_checks_and_tuples(capsys):
    shown = lesson.show([lesson.check("a", True, shown="1"), ("b", False, "2", "why b")])
    assert [c.name for c in shown] == ["a", "b"]
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{HOLDS} a: 1", f"{FAILS} b: 2 \u2014 Why: why b"]
    assert lesson.show(("c", True, "3"))[0].name == "c"


def test_show_rejects_other_things():
    with pytest.raises(TypeError, match="expected a Check"):
        lesson.show(["not a check"])


@pytest.mark.parametrize("c", [
    Check("a: b", True, "1 vs 2", ""),
    Check("claim", False, "1: 2", "busy CPU: pin less"),
    Check("claim", False, "1 vs 2", ""),
    Check("claim", None, "1 vs 1.1", "inside the spread: more repeats"),
])
def test_text_round_trips_through_parse_line(c):
    parsed = lesson.parse_line(c.text)
    assert parsed.holds == c.holds and parsed.otherwise == c.otherwise
    assert parsed.explained == c.explained
    assert f"{parsed.name}: {parsed.shown}" == f"{c.name}: {c.shown}"


@pytest.mark.parametrize("line", ["", "plain text", "\u2714no colon", "- \u2714 a: b"])
def test_parse_line_ignores_other_lines(line):
    assert lesson.parse_line(line) is None


def test_checks_in_outputs_reads_metadata_and_printed_lines():
    a = Check("a: with colon", False, "1", "why")
    outputs = [
        {"output_type": "display_data", "data": {"text/plain": a.text}, "metadata": {METADATA_KEY: a.to_dict()}},
        {"output_type": "stream", "name": "stdout", "text": ["noise\n", f"{HOLDS} b: 2\n"]},
        {"output_type": "stream", "name": "stderr", "text": f"{HOLDS} c: 3\n"},
        {"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {}},
    ]
    assert lesson.checks_in_outputs(outputs) == [a, Check("b", True, "2", "")]


def test_display_in_ipython_stores_fields_in_metadata():
    # A real IPython shell publishes the check with its fields in the output metadata.
    pytest.importorskip("IPython")
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "got = []\n"
        "shell.display_pub.publish = lambda data, metadata=None, **kw: got.append((data, metadata))\n"
        "from d2l_async import lesson\n"
        "lesson.expect('claim', False, shown='1 vs 2', otherwise='why')\n"
        "data, meta = got[0]\n"
        "assert data['text/plain'].startswith('\\u2718 claim: 1 vs 2'), data\n"
        "assert '<i>Why:</i> why' in data['text/html']\n"
        f"assert meta['{METADATA_KEY}'] == dict(name='claim', holds=False, shown='1 vs 2', otherwise='why', "
        "decided_by='', role='', numbers=(), claim='', cause='', detail=''), meta\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


def test_lesson_is_stdlib_only():
    code = ("import sys; import d2l_async.lesson; "
            "bad = [m for m in ('numpy', 'torch', 'plotly', 'ipywidgets', 'IPython') if m in sys.modules]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_exported_from_package():
    import d2l_async

    assert d2l_async.lesson is lesson


def test_a_cells_last_value_is_not_displayed_twice():
    """``lesson.expect(...)`` / ``lesson.show(...)`` as a cell's last line: one display each."""
    pytest.importorskip("IPython")
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "got = []\n"
        "shell.display_pub.publish = lambda data, metadata=None, **kw: got.append(data['text/plain'])\n"
        "run = lambda code: shell.run_cell(code, store_history=True)\n"  # counts executions, as a kernel
        "run(\"from d2l_async import lesson\")\n"
        "run(\"c = lesson.expect('a', True, shown='1')\")\n"
        "run(\"lesson.expect('b', True, shown='2')\")\n"
        "run(\"lesson.show([('d', True, '4'), ('e', True, '5')])\")\n"
        "run(\"c\")\n"  # a later cell shows it again, as any value
        "print('RESULT', repr(got))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    shown = eval(out.stdout.rsplit("RESULT ", 1)[1])
    assert shown == [f"{HOLDS} a: 1", f"{HOLDS} b: 2", f"{HOLDS} d: 4", f"{HOLDS} e: 5", f"{HOLDS} a: 1"], shown


# --- three outcomes ---------------------------------------------------------------
from d2l_async import verdict  # noqa: E402
from d2l_async.lesson import UNSURE  # noqa: E402


def test_cant_tell_has_its_own_mark_and_reason():
    c = lesson.check("X is faster", None, shown="1.0 ms vs 1.1 ms", otherwise="more repeats")
    assert c.holds is None and c.mark == UNSURE and c.mark not in (HOLDS, FAILS)
    assert c.text == f"{UNSURE} X is faster: 1.0 ms vs 1.1 ms \u2014 Can't tell: more repeats"
    assert "Can't tell:" in c._repr_html_() and HOLDS not in c.text and FAILS not in c.text
    assert c.explained
    # without a reason it still says what would make the effect visible
    assert "more repeats" in lesson.check("X", None, shown="1 vs 1").otherwise


def test_a_verdict_decides_the_check_and_is_recorded():
    noisy = verdict.compare([1.0, 1.3, 0.8, 1.1, 0.9], [1.05, 0.85, 1.25, 1.0, 0.95])
    c = lesson.check("a is faster", noisy, shown="1.0 vs 1.0 ms", otherwise="busy core")
    assert c.holds is None and c.decided_by.startswith("compare:")
    # the spread is one click away: in the detail (the HTML's <details>), not in the line
    assert "interval" in c.detail and "runs" in c.detail and "interval" not in c.text
    assert "<details" in c._repr_html_() and "interval" in c._repr_html_()
    clear = lesson.check("a is faster", verdict.compare([1.0, 1.01, 0.99], [2.0, 2.02, 1.98]), shown="1 vs 2")
    assert clear.holds is True and clear.decided_by.startswith("compare:")
    wrong = lesson.check("a is faster", verdict.compare([2.0, 2.02, 1.98], [1.0, 1.01, 0.99]), shown="2 vs 1",
                         otherwise="b had the spare core")
    assert wrong.holds is False and wrong.otherwise.startswith("b had the spare core")
    assert lesson.check("plain fact", True, shown="1").decided_by == ""


def test_cant_tell_round_trips_through_metadata():
    c = lesson.check("a", verdict.compare([1, 1.2, 0.9], [1.1, 0.95, 1.05]), shown="x", role="speed-up")
    outputs = [{"output_type": "display_data", "data": {"text/plain": c.text}, "metadata": {METADATA_KEY: c.to_dict()}}]
    assert lesson.checks_in_outputs(outputs) == [c]


def test_role_is_checked_and_contradictions_found():
    with pytest.raises(ValueError, match="role"):
        lesson.check("a", True, shown="1", role="gpu")
    machine_no = lesson.check("a spare core per rank", False, shown="1 CPU", otherwise="one CPU", role="machine")
    credited = lesson.check("overlap shortens the step", True, shown="1 vs 2", role="speed-up")
    unsure = lesson.check("overlap shortens the step", None, shown="1 vs 1", role="speed-up")
    assert lesson.contradictions([machine_no, credited]) == [(machine_no, credited)]
    assert lesson.contradictions([machine_no, unsure]) == []
    machine_yes = lesson.check("a spare core per rank", True, shown="8 CPUs", role="machine")
    assert lesson.contradictions([machine_yes, credited]) == []


# --- words built from this verdict's numbers ------------------------------------------------------
def test_a_verdicts_cant_tell_never_shows_the_reason_written_for_a_fail():
    v = verdict.compare([1.0, 1.3, 0.8, 1.1, 0.9], [1.05, 0.85, 1.25, 1.0, 0.95], names=("every step", "once"))
    c = lesson.check("every step is slower", v, shown="x", otherwise="a wait per step costs almost nothing extra")
    assert c.holds is None and "costs almost nothing" not in c.otherwise
    assert c.detail.startswith("every step / once = ")  # the spread, in the verdict's own direction
    # a can't tell given directly keeps its one explanation (there is no other outcome to confuse it with)
    assert lesson.check("x", None, shown="1", otherwise="more repeats").otherwise == "more repeats"


def test_a_check_keeps_its_verdicts_numbers_through_metadata():
    v = verdict.compare([1.0, 1.01, 0.99], [2.0, 2.02, 1.98], names=("bucketed", "after backward"))
    c = lesson.check("bucketed is faster", v, shown="1.00 s vs 2.00 s")
    assert c.number("ratio") == pytest.approx(0.5, rel=0.02) and c.number("a") == "bucketed"
    assert c.number("n_a") == 3 and c.number("missing", 7) == 7
    import json

    meta = json.loads(json.dumps(c.to_dict()))  # as a notebook stores it
    outputs = [{"output_type": "display_data", "data": {"text/plain": c.text}, "metadata": {METADATA_KEY: meta}}]
    assert lesson.checks_in_outputs(outputs) == [c]
    t = lesson.check("it falls", verdict.trend([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]), shown="5, 4, 3, 2, 1")
    assert t.number("rho") == pytest.approx(-1.0) and t.number("n") == 5


def test_spread_states_each_number_once():
    s = verdict.similar([1.0, 1.02, 0.98, 1.01, 0.99], [1.0, 1.01, 0.99, 1.0, 1.02], names=("item", "asnumpy")).spread
    assert s.startswith("item / asnumpy = ") and s.count("0.80") == 1 and s.count("1.25") == 1
    w = verdict.within([4.0, 4.1, 3.9], 4.0, tolerance=0.25, names=("measured", "model")).spread
    assert "\u00b1" not in w and w.count("0.75") == 1 and "measured / model = 1.00" in w


# --- the one-core rules: each contradiction as a notebook printed it, found by its rule ---------------
from tests.one_core import rules  # noqa: E402

_T = {
    "canned fail reason": Check("converting the loss every step is slower than converting once at the end", None,
                "every step 18.67 ms vs once at the end 12.74 ms (1.47x, medians, 250 steps)",
                "ratio 1.47 (bootstrap 90% interval of the median ratio 0.82–2.10, 5 vs 5 runs); the frontend and "
                "the engine's worker had no CPU to themselves: they take turns, so there is nothing for a full queue "
                "to overlap and a wait per step costs almost nothing extra (a step takes ~51 µs either way).",
                "compare: bootstrap 90% interval of the median ratio"),
    "at no cost beside 1.71x": Check("synchronizing every 1 minibatch costs time (never synchronizing finishes first)", None,
                "never 1.63 s vs every 1 minibatch 2.78 s; the frontend waited 0.0 ms vs 1.2 s",
                "ratio 0.59 from one run each (no spread measured); one run of each, 41% apart: identical runs "
                "vary by up to 2×. Here syncing bought memory at no cost in time",
                "compare: one run each, decided only beyond 2x"),
    "one profiled step": Check("the other ranks spend that time waiting inside the all-reduce", True,
                "in the traces, each even rank's communication grew over its own even run by 208.6 ms (rank 0), "
                "against a 100 ms delay"),
    "inverse ratios": Check("asynchronous beats synchronous in plain torch too", None,
                "25.1 µs/op synchronous vs 33.5 µs/op asynchronous (0.75x)",
                "ratio 1.34 (bootstrap 90% interval of the median ratio 0.90–1.80, 3 vs 3 runs); rerun",
                "compare: bootstrap 90% interval of the median ratio",
                numbers=(("ratio", 1.34), ("low", 0.9), ("high", 1.8))),
    "bounds twice": Check("item and asnumpy cost about the same: both wait for the same product", None,
                 "item / asnumpy = 1.02, medians of 7 runs each",
                 "ratio 1.02 (bootstrap 90% interval of the median ratio inside 0.80-1.25 0.94–1.25, 7 vs 7 runs)",
                 "similar: bootstrap 90% interval of the median ratio inside 0.80-1.25"),
    "plus-minus twice": Check("the pipeline model predicts the asynchronous time (within 25%)", None, "model 4.1 ms vs measured 4.0 ms",
                 "ratio 4.52 (bootstrap 90% interval of the median ratio inside 1 ± 0.25 3.76–5.25, 5 vs 3 runs)",
                 "within: bootstrap 90% interval of the median ratio inside 1 ± 0.25"),
    "double sign": Check("one slow rank slows every step by about its delay", False,
                 "median step 238.2 ms with rank 1 sleeping 100 ms vs 247.9 ms even (+-9.7 ms)", "busy core",
                 "compare: range of the ratio"),
    "adds a negative": Check("in the book's experiment the product dominates: the conversion adds little", True,
                 "product + conversion 12.50 ms (asnumpy), fastest of 7 runs each; a conversion alone adds −239 µs",
                 "", "compare: one run each, decided only beyond 2x"),
    "modelled": Check("modelled link: overlapping communication with backward shortens the step", True,
                      "median step 1.160 s bucketed vs 1.165 s after backward (backward measured here, link modelled)",
                      "", "compare: bootstrap 90% interval of the median of the paired ratios"),
    "end points": Check("the per-op cost grows from 1 to 16 worker threads", True,
                "CPU time per op 7.53 µs with 1 worker → 9.16 µs with 16: ×1.22; medians by count: 1: 7.53, "
                "2: 9.28, 4: 10.2, 8: 7.97, 16: 9.16 µs", "", "compare: bootstrap 90% interval of the median ratio"),
}


@pytest.mark.parametrize("finding, rule", [
    ("canned fail reason", "unsure-claims-an-outcome"), ("at no cost beside 1.71x", "unsure-claims-an-outcome"),
    ("one profiled step", "timing-tick-undecided"),
    ("inverse ratios", "ratio-both-ways"), ("bounds twice", "garbled-number"), ("plus-minus twice", "garbled-number"),
    ("double sign", "garbled-number"),
    ("adds a negative", "garbled-number"), ("end points", "trend-not-by-trend"), ("modelled", "modelled-as-evidence")])
def test_each_contradiction_a_notebook_printed_breaks_a_rule(finding, rule):
    found = {p.rule for p in rules.problems([rules.Cell((_T[finding],))])}
    assert rule in found, (finding, found)


def test_a_lecturers_own_print_never_breaks_a_rule():
    """The rules read checks' metadata only: whatever a lecturer prints beside them is theirs."""
    printed = ("ours 0.73x vs the book's 3.4x", "1 element t1 13.60 µs, t2 5.70 µs/op -> backend slower",
               "item     waited  130.07 ms   <cell>:8", "item     waited  405.80 ms   <cell>:10")
    fine = Check("each blocker made the frontend wait for its product", True, "6 waits, each with its line")
    assert rules.problems([rules.Cell((), printed), rules.Cell((fine,), printed)]) == []


def test_the_claim_rules_see_a_check_without_claim_cause_or_brevity():
    from d2l_async.experiments import barriers

    ok = barriers.NARROW_SOONER.check(verdict.compare([0.1, 0.11, 0.09], [1.0, 1.1, 0.9], by=0.5,
                                                      names=("narrow", "waitall")))
    assert rules.claim_problems(ok, "03_barriers") == []
    assert [p.rule for p in rules.claim_problems(ok, "04_blockers")] == ["claim-of-another-notebook"]
    bare = lesson.check("x", False, shown=" ".join(["word"] * 40), otherwise="why")
    assert [p.rule for p in rules.claim_problems(bare)] == ["no-claim", "no-cause", "line-too-long"]


def test_a_p_value_and_a_labelled_sentence_are_not_read_as_ratios_or_rows():
    trend_line = Check("the advantage shrinks as the ops grow", None, "1 el. 1.72×, 100,000 el. 2.71×",
                       "Spearman's rho -0.40 over 4 points (one-sided p = 0.375; the claim needs p < 0.05)",
                       "trend: Spearman's rank correlation over every point")
    model = rules.Cell((Check("asynchronous issue is faster", True, "synchronous 105 ms vs asynchronous 43.4 ms",
                              decided_by="compare: x"),),
                       ("asynchronous, pipeline n·max + min + t3 = 0.0434 s", "asynchronous, taking turns = 0.0610 s"))
    assert rules.problems([rules.Cell((trend_line,)), model]) == []


def test_words_that_agree_with_their_numbers_break_no_rule():
    v = verdict.compare([18.0, 18.5, 19.0, 18.2, 18.7], [12.0, 12.7, 13.1, 12.4, 12.9], less=False,
                         names=("every step", "once at the end"))
    ok = lesson.check("converting the loss every step is slower than converting once at the end", v,
                      shown="every step 18.50 ms vs once at the end 12.70 ms (every step / once at the end = 1.46)")
    fine = [ok, lesson.check("the queue stays within k x 4", True, shown="k=1: 4 ≤ 4"),
            lesson.check("x", None, shown="1.0 ms vs 1.1 ms", unclear="more repeats decide it"),
            Check("a rank's exception reaches the notebook within 10 s", True, "here 0.21 s after rank 1 raised it")]
    cell = rules.Cell(tuple(fine), ("convert every step:       18.50 ms", "item     waited  130.07 ms   <cell>:8"))
    found = rules.problems([cell])
    assert [p for p in found if p.rule != "times-compared-undecided"] == [] and len(found) == 1


def test_a_modelled_result_has_its_own_mark_and_is_never_evidence():
    from d2l_async.lesson import MODELLED

    v = verdict.compare_paired([1.0, 1.01, 0.99], [1.1, 1.11, 1.09])
    c = lesson.check("modelled link: bucketing shortens the step", v, shown="1.00 s vs 1.10 s", role="modelled")
    assert c.holds is True and c.mark == MODELLED and not c.evidence and c.text.startswith(MODELLED)
    assert lesson.parse_line(c.text).role == "modelled"
    assert rules.check_problems(c) == []
    with pytest.raises(ValueError, match="modelled"):
        lesson.check("bucketing shortens the step", v, shown="1.00 s vs 1.10 s", role="modelled")


@pytest.mark.parametrize("seconds, text", [(3.164, "3.16 s"), (0.034, "34 ms"), (4.56e-6, "4.56 µs"), (999.7e-6, "1 ms"),
                                           (5e-7, "500 ns"), (-239e-6, "-239 µs"), (float("nan"), "n/a"), (None, "n/a")])
def test_one_time_format_chooses_the_unit_by_magnitude(seconds, text):
    from d2l_async._words import fmt_time

    assert fmt_time(seconds) == text


def test_a_change_carries_its_sign_once_and_a_negative_cost_is_not_added():
    from d2l_async._words import added, fmt_change

    assert fmt_change(0.0032) == "+3.2 ms" and fmt_change(-0.0097) == "-9.7 ms"
    assert added(239e-6) == "adds 239 µs" and "nothing measurable" in added(-239e-6)
    assert not rules.check_problems(Check("x", True, f"a conversion alone {added(-239e-6)}"))


def test_plain_torch_increments_state_their_ratio_in_the_direction_they_decided_it():
    """05's plain-PyTorch cell printed "(0.75x)" beside a can't-tell whose spread said "ratio 1.34"."""
    from d2l_async.torch_async import lessons as pt

    for sync_s, async_s in (((0.25, 0.26, 0.24), (0.33, 0.34, 0.32)), ((0.30, 0.31, 0.29), (0.20, 0.21, 0.19))):
        faster = pt.increments(sync_s, async_s, (0.05,) * 3, 10_000)[0]
        assert (faster.number("a"), faster.number("b")) == ("synchronous", "asynchronous")
        assert faster.number("ratio") == pytest.approx(sorted(sync_s)[1] / sorted(async_s)[1])  # of the medians
        assert not [p for p in rules.check_problems(faster) if p.rule == "ratio-both-ways"], faster.text


def test_a_check_keeps_the_runs_numbers_so_a_test_reads_fields_not_words():
    import numpy as np

    from d2l_async import verdict

    fact = lesson.check("the queue stays bounded", True, shown="4 ≤ 4",
                        numbers={"max_queue": np.int64(4), "share": np.float32(0.5), "slower": "backend"})
    assert fact.numbers == (("max_queue", 4), ("share", 0.5), ("slower", "backend"))
    assert type(fact.number("max_queue")) is int and fact.to_dict()["numbers"][0] == ("max_queue", 4)
    v = verdict.compare([1.0, 1.1, 0.9], [2.0, 2.1, 1.9], names=("a", "b"))
    decided = lesson.check("a is faster", v, shown="a / b = 0.50", numbers={"a_s": 1.0})
    assert decided.number("ratio") == pytest.approx(v.ratio) and decided.numbers[-1] == ("a_s", 1.0)
    with pytest.raises(ValueError, match="'ratio'"):
        lesson.check("a is faster", v, shown="x", numbers={"ratio": 2.0})
    with pytest.raises(TypeError, match="numbers"):
        lesson.check("x", True, shown="y", numbers=[("a", 1)])
    with pytest.raises(TypeError, match="numbers"):
        lesson.check("x", True, shown="y", numbers={"a": [1]})
