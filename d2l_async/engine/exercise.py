"""The exercise of :mod:`.minimal`: write the dependency rules yourself, and have them graded.

In notebook 2 you write the two functions at the heart of :mod:`d2l_async.engine.minimal`:

* ``push_op(op) -> bool``: join ``op`` to the lines of the vars it reads (``op.reads``) and writes
  (``op.writes``), count in ``op.wait`` those that have not granted it access, and return True when
  none is left (the op may run now);
* ``finish_op(op) -> list``: ``op`` has run; release its vars and return the ops that became ready.

Each var is a :class:`~d2l_async.engine.minimal.Var` (``readers``, ``writer``, ``waiting``: a deque
to use as you like).  :func:`grade` runs the project's dependency-rule cases against your two
functions -- the cases ``tests/engine/test_deps.py`` holds the fast engine's rules to -- and returns
a :class:`Grade` that shows which pass.  A case judges only what your functions *return*: which ops
may run, and when.  The same cases hold the reference (``minimal.push_op``/``finish_op``) and the
fast engine's rules (``engine._deps``) in the tests, so a case a correct rule set fails is a bug of
the grader.

:func:`listing` shows the file itself, with the two bodies you write folded (a notebook must not
show the solution above its exercise).
"""

from __future__ import annotations

import ast
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .._args import flag
from . import minimal
from .minimal import Op, Var

__all__ = ["CASES", "CaseResult", "Grade", "Listing", "grade", "listing"]

#: The functions the student writes: :func:`listing` folds their bodies unless asked for the solution.
RULES = ("push_op", "finish_op")


class _Wrong(Exception):
    """A case's expectation that the student's functions did not meet."""


class _Script:
    """Drive ``push_op``/``finish_op`` step by step, with names for the ops in the messages."""

    def __init__(self, push_op: Callable[[Any], Any], finish_op: Callable[[Any], Any],
                 make_var: Callable[[], Any], make_op: Callable[[Any, Any], Any]) -> None:
        self._push, self._finish, self._make_var, self._make_op = push_op, finish_op, make_var, make_op
        self._names: dict[int, str] = {}

    def var(self) -> Any:
        return self._make_var()

    def op(self, name: str, reads: tuple = (), writes: tuple = ()) -> Any:
        o = self._make_op(tuple(reads), tuple(writes))
        self._names[id(o)] = name
        return o

    def name(self, o: Any) -> str:
        return self._names.get(id(o), repr(o))

    def push(self, o: Any, ready: bool, why: str) -> None:
        got = self._push(o)
        if not isinstance(got, bool) or got is not ready:
            raise _Wrong(f"push_op({self.name(o)}) returned {got!r}, expected {ready}: {why}")

    def finish(self, o: Any, ready: tuple = (), why: str = "") -> None:
        got = self._finish(o)
        try:
            names = sorted(self.name(x) for x in got)
        except TypeError:
            raise _Wrong(f"finish_op({self.name(o)}) returned {got!r}, expected a list of ops") from None
        want = sorted(self.name(x) for x in ready)
        if names != want:
            raise _Wrong(f"finish_op({self.name(o)}) returned [{', '.join(names)}], expected "
                         f"[{', '.join(want)}]: {why}")


def _reads_together(s: _Script) -> None:
    x = s.var()
    a, b = s.op("read1", reads=[x]), s.op("read2", reads=[x])
    s.push(a, True, "nothing writes x, so a read may run at once")
    s.push(b, True, "reads of one version of x run side by side")


def _write_after_reads(s: _Script) -> None:
    x = s.var()
    r1, r2, w = s.op("read1", reads=[x]), s.op("read2", reads=[x]), s.op("write", writes=[x])
    s.push(r1, True, "nothing writes x")
    s.push(r2, True, "reads of one version run side by side")
    s.push(w, False, "the write must wait until both reads pushed before it have read x")
    s.finish(r1, (), "read2 still reads x")
    s.finish(r2, (w,), "the last read finished: the write may run")


def _read_after_write(s: _Script) -> None:
    x = s.var()
    w, r = s.op("write", writes=[x]), s.op("read", reads=[x])
    s.push(w, True, "nothing else touches x")
    s.push(r, False, "a read pushed after a write must see its result: it waits")
    s.finish(w, (r,), "the write finished: the read waiting for it may run")


def _write_admits_reads(s: _Script) -> None:
    x = s.var()
    w1, r1, r2 = s.op("write1", writes=[x]), s.op("read1", reads=[x]), s.op("read2", reads=[x])
    w2, r3 = s.op("write2", writes=[x]), s.op("read3", reads=[x])
    s.push(w1, True, "nothing else touches x")
    for o in (r1, r2, w2, r3):
        s.push(o, False, "it was pushed after write1, which has not run")
    s.finish(w1, (r1, r2), "write1 finished: the reads up to the next write may run, not write2 or read3")
    s.finish(r1, (), "read2 still reads x")
    s.finish(r2, (w2,), "both reads finished: write2 may run")
    s.finish(w2, (r3,), "write2 finished: read3 may run")


def _writes_in_order(s: _Script) -> None:
    x = s.var()
    w1, w2 = s.op("write1", writes=[x]), s.op("write2", writes=[x])
    s.push(w1, True, "nothing else touches x")
    s.push(w2, False, "writes run in push order: write2 waits for write1")
    s.finish(w1, (w2,), "write1 finished: write2 may run")


def _every_var(s: _Script) -> None:
    x, y, z = s.var(), s.var(), s.var()
    wx, wy, both = s.op("write_x", writes=[x]), s.op("write_y", writes=[y]), s.op("z=x+y", reads=[x, y], writes=[z])
    s.push(wx, True, "nothing else touches x")
    s.push(wy, True, "nothing else touches y")
    s.push(both, False, "it reads x and y, and both are being written")
    s.finish(wx, (), "x is ready, but y is still being written")
    s.finish(wy, (both,), "x and y are both ready now")


def _in_place(s: _Script) -> None:
    x = s.var()
    inc, r = s.op("x+=x", reads=[x], writes=[x]), s.op("read", reads=[x])
    s.push(inc, True, "an op that reads and writes x is one write of x; nothing else touches x")
    s.push(r, False, "the read must see x += x")
    s.finish(inc, (r,), "x += x finished: the read may run")


def _many_reads(s: _Script) -> None:
    x = s.var()
    reads = [s.op(f"read{i}", reads=[x]) for i in range(1000)]
    w = s.op("write", writes=[x])
    for o in reads:
        s.push(o, True, "reads of one version run side by side, however many")
    s.push(w, False, "the write waits for all 1000 reads")
    for o in reads[:-1]:
        s.finish(o, (), "some reads of x have not finished")
    s.finish(reads[-1], (w,), "the last of the 1000 reads finished: the write may run")


def _read_write_read(s: _Script) -> None:
    x = s.var()
    a, b, c = s.op("read1", reads=[x]), s.op("write", writes=[x]), s.op("read2", reads=[x])
    s.push(a, True, "nothing writes x")
    s.push(b, False, "the write waits for read1")
    s.push(c, False, "read2 was pushed after the write: it must see the write's result")
    s.finish(a, (b,), "read1 finished: the write may run (not read2, which comes after it)")
    s.finish(b, (c,), "the write finished: read2 may run")


def _fresh_output(s: _Script) -> None:
    x, y = s.var(), s.var()
    make, r = s.op("y=x+1", reads=[x], writes=[y]), s.op("read_y", reads=[y])
    s.push(make, True, "x is ready and y is new")
    s.push(r, False, "y has no value until y = x + 1 has run")
    s.finish(make, (r,), "y = x + 1 finished: its reader may run")


def _freed_twice(s: _Script) -> None:
    x, y = s.var(), s.var()
    w, r = s.op("write_x_y", writes=[x, y]), s.op("read_x_y", reads=[x, y])
    s.push(w, True, "nothing else touches x or y")
    s.push(r, False, "x and y are being written")
    s.finish(w, (r,), "x and y both grant read_x_y now: it is ready, and listed once (or it runs twice)")


#: The cases, by name: each drives ``push_op``/``finish_op`` through a short program of one or a
#: few variables and checks every return value.  The first ten are ``tests/engine/test_deps.py``'s
#: cases; the last catches a ``finish_op`` that lists an op once per var that granted it.
CASES: dict[str, Callable[[_Script], None]] = {
    "reads of one version run together": _reads_together,
    "a write waits for the reads pushed before it": _write_after_reads,
    "a read waits for the write pushed before it": _read_after_write,
    "a finished write admits the reads up to the next write": _write_admits_reads,
    "writes run in push order": _writes_in_order,
    "an op waits until every var granted it": _every_var,
    "x += x is one write of x": _in_place,
    "a write waits for 1000 reads": _many_reads,
    "read, write, read of one var": _read_write_read,
    "a new array is read after the op that makes it": _fresh_output,
    "an op two vars free at once is ready once": _freed_twice,
}


@dataclass(frozen=True)
class CaseResult:
    """One case of :func:`grade`.

    Attributes:
        name: the case (a key of :data:`CASES`).
        passed: whether every return value was the expected one.
        detail: what went wrong, first (``""`` when it passed).
    """

    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class Grade:
    """What :func:`grade` found: one :class:`CaseResult` per case, shown as a table."""

    cases: tuple[CaseResult, ...]

    @property
    def passed(self) -> bool:
        """Whether every case passed."""
        return all(c.passed for c in self.cases)

    @property
    def failed(self) -> tuple[str, ...]:
        """The names of the cases that failed, in order."""
        return tuple(c.name for c in self.cases if not c.passed)

    def __repr__(self) -> str:
        rows = [f"{'pass' if c.passed else 'FAIL'}  {c.name}" + (f"\n      {c.detail}" if c.detail else "")
                for c in self.cases]
        return f"{len(self.cases) - len(self.failed)} of {len(self.cases)} cases pass\n" + "\n".join(rows)

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{'pass' if c.passed else '<b>FAIL</b>'}</td><td>{html.escape(c.name)}</td>"
                       f"<td>{html.escape(c.detail)}</td></tr>" for c in self.cases)
        return (f"<p>{len(self.cases) - len(self.failed)} of {len(self.cases)} cases pass</p><table>"
                f"<tr><th></th><th>case</th><th>what went wrong</th></tr>{rows}</table>")


def _run(push_op: Callable[[Any], Any], finish_op: Callable[[Any], Any], make_var: Callable[[], Any],
         make_op: Callable[[Any, Any], Any]) -> Grade:
    """Run every case on fresh vars and ops made by ``make_var``/``make_op(reads, writes)``."""
    results = []
    for name, case in CASES.items():
        try:
            case(_Script(push_op, finish_op, make_var, make_op))
        except _Wrong as e:
            results.append(CaseResult(name, False, str(e)))
        except Exception as e:  # noqa: BLE001 - the student's error is the result
            results.append(CaseResult(name, False, f"raised {type(e).__name__}: {e}"))
        else:
            results.append(CaseResult(name, True))
    return Grade(tuple(results))


def grade(push_op: Callable[[Op], bool], finish_op: Callable[[Op], list]) -> Grade:
    """Run the dependency-rule cases against your ``push_op`` and ``finish_op``.

    Args:
        push_op: ``push_op(op) -> bool``, as :func:`d2l_async.engine.minimal.push_op`.
        finish_op: ``finish_op(op) -> list`` of the ops that became ready, as
            :func:`d2l_async.engine.minimal.finish_op`.

    Returns:
        A :class:`Grade`: ``passed``, ``failed`` (the names of the failed cases) and ``cases``; a
        notebook shows it as a table of every case, with what went wrong first where one failed.
    """
    for name, fn in (("push_op", push_op), ("finish_op", finish_op)):
        if not callable(fn):
            raise TypeError(f"{name} must be a function {name}(op), got {type(fn).__name__} {fn!r:.60}")
    return _run(push_op, finish_op, Var, lambda reads, writes: Op(None, reads, writes))


@dataclass(frozen=True)
class Listing:
    """The source of :mod:`d2l_async.engine.minimal`, as a notebook shows it (Markdown, Python highlighted).

    Attributes:
        path: the file, relative to the repository (``d2l_async/engine/minimal.py``).
        text: its source, with the bodies of ``hidden`` folded to one line each.
        hidden: the functions whose bodies are folded (empty: the whole file).
        lines: the file's length in lines.
    """

    path: str
    text: str
    hidden: tuple[str, ...]
    lines: int

    def __str__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return f"`{self.path}` ({self.lines} lines)\n\n```python\n{self.text}\n```"


def listing(*, solution: bool = False) -> Listing:
    """The one-file engine's source, to show in a notebook.

    Args:
        solution: show the bodies of ``push_op`` and ``finish_op`` too (default: folded, each to a
            line that says where in the file it is, so the exercise stays an exercise).

    Returns:
        A :class:`Listing`; a notebook renders it as a highlighted Python listing.
    """
    path = Path(minimal.__file__)
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    hidden = () if flag("solution", solution) else RULES
    functions = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name in hidden]
    for fn in sorted(functions, key=lambda n: n.lineno, reverse=True):  # from the bottom: line numbers hold
        first, last = fn.body[1].lineno, fn.end_lineno  # body[0] is the docstring: it stays
        lines[first - 1:last] = [f"    ...  # the exercise: write it yourself (the solution: lines {first}-{last})"]
    return Listing(f"d2l_async/engine/{path.name}", "\n".join(lines), hidden, len(source.splitlines()))
