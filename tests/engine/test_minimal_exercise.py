"""The exercise's grader (``engine/exercise.py``): it passes correct rules and names what wrong ones break.

Correct: the one-file engine's ``push_op``/``finish_op`` and the fast engine's (``engine._deps``).  Wrong,
seeded the way students get it wrong: reads that do not wait for a writer, a write that does not wait
for the reads before it, a finished write that wakes nobody in its line, and an op listed as ready once
per var that granted it (the engine would run it twice).  Each must fail the case that
names its mistake, and only the cases that mistake can reach.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from d2l_async.engine import _deps, exercise, minimal
from d2l_async.engine.minimal import finish_op, push_op

ALL = tuple(exercise.CASES)


def push_reads_skip_the_writer(op):
    """Seeded mistake: a read is granted at once even while a write of the var waits or runs."""
    for v in op.reads:
        v.readers += 1
    for v in op.writes:
        if v.writer is None:
            v.writer = op
            if v.readers:
                op.wait += 1
        else:
            v.waiting.append((op, True))
            op.wait += 1
    return op.wait == 0


def push_write_ignores_readers(op):
    """Seeded mistake: a write is granted at push even while reads pushed before it have not run."""
    for v in op.reads:
        if v.writer is None:
            v.readers += 1
        else:
            v.waiting.append((op, False))
            op.wait += 1
    for v in op.writes:
        if v.writer is None:
            v.writer = op
        else:
            v.waiting.append((op, True))
            op.wait += 1
    return op.wait == 0


def finish_wakes_nobody(op):
    """Seeded mistake: a finished write frees its var but never admits the ops waiting in its line."""
    granted = []
    for v in op.reads:
        v.readers -= 1
        if v.readers == 0 and v.writer is not None:
            granted.append(v.writer)
    for v in op.writes:
        v.writer = None
    for o in granted:
        o.wait -= 1
    return [o for o in granted if o.wait == 0]


def finish_lists_twice(op):
    """Seeded mistake: the ready ops are picked after every grant, so an op two vars granted is listed twice."""
    granted = []
    for v in op.reads:
        v.readers -= 1
        if v.readers == 0 and v.writer is not None:
            granted.append(v.writer)
    for v in op.writes:
        v.writer = None
        while v.waiting:
            o, is_write = v.waiting.popleft()
            if is_write:
                v.writer = o
                if v.readers == 0:
                    granted.append(o)
                break
            v.readers += 1
            granted.append(o)
    for o in granted:
        o.wait -= 1
    return [o for o in granted if o.wait == 0]


def test_the_reference_rules_pass_every_case():
    g = exercise.grade(push_op, finish_op)
    assert g.passed and g.failed == ()
    assert [c.name for c in g.cases] == list(ALL) and len(ALL) == 11
    assert all(c.passed and c.detail == "" for c in g.cases)


def test_the_fast_engines_rules_pass_every_case():
    g = exercise._run(_deps.push_op, _deps.finish_op, _deps.Var,
                      lambda reads, writes: _deps.Op(*_deps.split_access(reads, writes)))
    assert g.passed, g


@pytest.mark.parametrize("push, finish, fails", [
    (push_reads_skip_the_writer, finish_op,
     {"a read waits for the write pushed before it", "a finished write admits the reads up to the next write",
      "an op waits until every var granted it", "x += x is one write of x", "read, write, read of one var",
      "a new array is read after the op that makes it", "an op two vars free at once is ready once"}),
    (push_write_ignores_readers, finish_op,
     {"a write waits for the reads pushed before it", "a write waits for 1000 reads",
      "read, write, read of one var"}),
    (push_op, finish_wakes_nobody,
     {"a read waits for the write pushed before it", "a finished write admits the reads up to the next write",
      "writes run in push order", "an op waits until every var granted it", "x += x is one write of x",
      "read, write, read of one var", "a new array is read after the op that makes it",
      "an op two vars free at once is ready once"}),
    (push_op, finish_lists_twice, {"an op two vars free at once is ready once"}),
], ids=["readers-skip-the-writer", "write-after-read-unordered", "finish-wakes-nobody", "finish-lists-twice"])
def test_a_seeded_mistake_fails_the_cases_it_breaks(push, finish, fails):
    g = exercise.grade(push, finish)
    assert not g.passed
    assert set(g.failed) == fails
    assert {c.name for c in g.cases if c.passed} == set(ALL) - fails
    assert all(c.detail for c in g.cases if not c.passed)


def test_the_detail_says_which_call_returned_what():
    g = exercise.grade(push_write_ignores_readers, finish_op)
    case = next(c for c in g.cases if c.name == "a write waits for the reads pushed before it")
    assert case.detail.startswith("push_op(write) returned True, expected False")
    g = exercise.grade(push_op, finish_wakes_nobody)
    case = next(c for c in g.cases if c.name == "a read waits for the write pushed before it")
    assert case.detail.startswith("finish_op(write) returned [], expected [read]")


def test_a_students_exception_fails_the_case_with_its_message():
    def unfinished(op):
        raise NotImplementedError("write push_op")

    g = exercise.grade(unfinished, finish_op)
    assert g.failed == ALL
    assert g.cases[0].detail == "raised NotImplementedError: write push_op"
    g = exercise.grade(push_op, lambda op: None)  # finish_op must return the ops, not None
    assert "reads of one version run together" not in g.failed  # that case finishes nothing
    assert "returned None, expected a list of ops" in g.cases[1].detail


def test_the_grade_shows_a_row_per_case():
    g = exercise.grade(push_write_ignores_readers, finish_op)
    text = repr(g)
    assert text.splitlines()[0] == "8 of 11 cases pass"
    assert sum(line.startswith("FAIL  ") for line in text.splitlines()) == 3
    assert g._repr_html_().count("<tr>") == 12  # a header and a row per case


def test_grade_refuses_what_is_not_a_function():
    with pytest.raises(TypeError, match="finish_op must be a function"):
        exercise.grade(push_op, None)


def test_the_listing_folds_the_solution_and_says_where_it_is():
    source = Path(minimal.__file__).read_text(encoding="utf-8")
    full = exercise.listing(solution=True)
    assert full.text == source.rstrip("\n") and full.hidden == ()
    folded = exercise.listing()
    assert folded.hidden == ("push_op", "finish_op") and folded.lines == len(source.splitlines())
    assert "v.waiting.popleft()" in source and "v.waiting.popleft()" not in folded.text
    assert "v.readers += 1" not in folded.text
    lines = source.splitlines()
    folds = [line for line in folded.text.splitlines() if "the solution: lines" in line]
    assert len(folds) == 2  # push_op's, then finish_op's
    for name, fold in zip(("push_op", "finish_op"), folds):
        first, last = map(int, fold.rsplit("lines ", 1)[1].rstrip(")").split("-"))
        assert lines[first - 3].startswith(f"def {name}(") and lines[first - 2].strip().startswith('"""')
        assert lines[last - 1].strip().startswith("return") and lines[last].strip() == ""  # the whole body
    assert folded._repr_markdown_().startswith("`d2l_async/engine/minimal.py`")
    with pytest.raises(TypeError, match="solution"):
        exercise.listing(solution="yes")
