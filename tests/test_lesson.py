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
        "decided_by='', role=''), meta\n"
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


# --- three outcomes (issue 20) ---------------------------------------------------------------
from d2l_async import _verdict  # noqa: E402
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
    noisy = _verdict.compare([1.0, 1.3, 0.8, 1.1, 0.9], [1.05, 0.85, 1.25, 1.0, 0.95])
    c = lesson.check("a is faster", noisy, shown="1.0 vs 1.0 ms", otherwise="busy core")
    assert c.holds is None and c.decided_by.startswith("compare:")
    assert "interval" in c.otherwise and "runs" in c.otherwise  # the spread is shown
    clear = lesson.check("a is faster", _verdict.compare([1.0, 1.01, 0.99], [2.0, 2.02, 1.98]), shown="1 vs 2")
    assert clear.holds is True and clear.decided_by.startswith("compare:")
    wrong = lesson.check("a is faster", _verdict.compare([2.0, 2.02, 1.98], [1.0, 1.01, 0.99]), shown="2 vs 1",
                         otherwise="b had the spare core")
    assert wrong.holds is False and wrong.otherwise.startswith("b had the spare core")
    assert lesson.check("plain fact", True, shown="1").decided_by == ""


def test_cant_tell_round_trips_through_metadata():
    c = lesson.check("a", _verdict.compare([1, 1.2, 0.9], [1.1, 0.95, 1.05]), shown="x", role="speed-up")
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
