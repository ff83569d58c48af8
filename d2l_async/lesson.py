"""Lesson checks: a sentence about *this run* is computed from this run, never typed.

The book states a claim ("the narrow wait lets the frontend go on sooner"); whether it held on the
reader's machine is a fact of the measurement.  A notebook therefore never prints a promised
result: it states the claim, the condition computed from the numbers, and the numbers themselves::

    lesson.expect("the narrow wait lets the frontend go on sooner",
                  r.narrow_s < r.wide_s,
                  shown=f"waited {r.narrow_s * 1e3:.1f} ms vs {r.wide_s * 1e3:.1f} ms",
                  otherwise="one usable CPU, busy: the worker ran only while the frontend waited. "
                            "Raise n_ops, or run on a machine with a spare core.")

renders one line::

    ✔ the narrow wait lets the frontend go on sooner: waited 1.2 ms vs 310.4 ms
    ✘ the narrow wait lets the frontend go on sooner: waited 311 ms vs 310 ms — Why: one usable CPU, ...

A ✘ always carries its *Why*: the measured reason (usable CPUs, load, sizes, which side was the
bottleneck) and what to change.  A ✘ without one is a bug in the notebook, and ``make test``'s
one-core run fails on it (:attr:`Check.explained`).

The three calls:

* :func:`check` builds a frozen :class:`Check` without displaying it (use it in experiment modules:
  a ``checks(result)`` function is then a pure function of a frozen result, testable with synthetic
  results);
* :func:`show` displays one check or several;
* :func:`expect` = :func:`check` + :func:`show`.

In a notebook each check is displayed with IPython's ``display`` as text and HTML, and its fields
are also stored in the output's metadata under :data:`METADATA_KEY`, so a test reading the executed
notebook recovers every check exactly (:func:`checks_in_outputs`) without parsing prose.  Outside
IPython the text line is printed.  Standard library only.
"""

from __future__ import annotations

import html
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Union

__all__ = ["Check", "CheckList", "check", "expect", "show", "checks_in_outputs", "parse_line",
           "METADATA_KEY", "HOLDS", "FAILS"]

#: The marks; a rendered check line starts with one of them.
HOLDS = "\u2714"  # ✔
FAILS = "\u2718"  # ✘
#: The key under which a displayed check's fields are stored in the notebook output's metadata.
METADATA_KEY = "d2l_async_lesson"
#: Separates the numbers from the explanation in the text line.
WHY = " \u2014 Why: "


@dataclass(frozen=True)
class Check:
    """The outcome of one expected lesson on this run.

    Attributes:
        name: the claim, e.g. ``"the narrow wait lets the frontend go on sooner"``.
        holds: whether the condition computed from this run's numbers is true.
        shown: the numbers behind it, e.g. ``"waited 1.2 ms vs 310.4 ms"``.
        otherwise: why it did not hold (measured reason + what to change); read only when
            ``holds`` is False.
    """

    name: str
    holds: bool
    shown: str
    otherwise: str = ""

    @property
    def mark(self) -> str:
        return HOLDS if self.holds else FAILS

    @property
    def explained(self) -> bool:
        """True unless this is a ✘ without an explanation (a bug in whoever built it)."""
        return self.holds or bool(self.otherwise.strip())

    @property
    def text(self) -> str:
        """The one line shown in the notebook."""
        line = f"{self.mark} {self.name}: {self.shown}"
        if not self.holds:
            why = self.otherwise.strip() or "(no explanation given: a bug in the notebook)"
            line += f"{WHY}{why}"
        return line

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _repr_html_(self) -> str:
        colour = "#1b7837" if self.holds else "#b2182b"
        body = (f'<span style="color:{colour};font-weight:bold">{self.mark}</span> '
                f"<b>{html.escape(self.name)}</b>: {html.escape(self.shown)}")
        if not self.holds:
            why = self.otherwise.strip() or "(no explanation given: a bug in the notebook)"
            body += f"<br><i>Why:</i> {html.escape(why)}"
        return f'<div class="d2l-async-lesson">{body}</div>'

    def __str__(self) -> str:
        return self.text

    def _ipython_display_(self) -> None:
        # ``lesson.expect(...)`` as a cell's last line already displayed the check: its return
        # value must not show it twice.  Evaluated later on its own, it displays as usual.
        if getattr(self, "_shown_in", None) != _execution_count():
            _display(self)


class CheckList(list):
    """The checks :func:`show` displayed; as a cell's last value it is not displayed again."""

    def _ipython_display_(self) -> None:
        if getattr(self, "_shown_in", None) != _execution_count():
            for c in self:
                _display(c)


def _execution_count() -> int | None:
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return getattr(shell, "execution_count", None) if shell is not None else None


CheckLike = Union[Check, tuple]


def _is_bool(value: Any) -> bool:
    # numpy.bool_ (comparisons of arrays/scalars) counts; ints, strings and None do not.
    return isinstance(value, bool) or type(value).__name__ in {"bool_", "bool"}


def check(name: str, holds: bool, *, shown: str, otherwise: str = "") -> Check:
    """A :class:`Check` built from this run's numbers, not displayed.

    Raises:
        TypeError: ``holds`` is not a bool (e.g. ``None`` or a number: compute the condition).
        ValueError: ``name`` or ``shown`` is empty.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"lesson check: name must be a non-empty string (the claim), got {name!r}")
    if not _is_bool(holds):
        raise TypeError(f"lesson check {name!r}: holds must be a bool computed from the run, "
                        f"got {type(holds).__name__} {holds!r}")
    if not isinstance(shown, str) or not shown.strip():
        raise ValueError(f"lesson check {name!r}: shown must state the numbers, got {shown!r}")
    if not isinstance(otherwise, str):
        raise TypeError(f"lesson check {name!r}: otherwise must be a string, got {type(otherwise).__name__}")
    return Check(name.strip(), bool(holds), shown.strip(), otherwise.strip())


def _as_check(item: CheckLike) -> Check:
    if isinstance(item, Check):
        return item
    if isinstance(item, tuple) and len(item) in (3, 4):
        name, holds, shown, *rest = item
        return check(name, holds, shown=shown, otherwise=rest[0] if rest else "")
    raise TypeError(f"lesson.show: expected a Check or a (name, holds, shown[, otherwise]) tuple, "
                    f"got {item!r}")


def _in_ipython() -> bool:
    ipython = sys.modules.get("IPython")
    return ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None


def _display(c: Check) -> None:
    object.__setattr__(c, "_shown_in", _execution_count())  # not a field: equality is unchanged
    if _in_ipython():
        from IPython.display import display

        display({"text/plain": c.text, "text/html": c._repr_html_()}, raw=True,
                metadata={METADATA_KEY: c.to_dict()})
    else:
        print(c.text)


def show(checks: CheckLike | Iterable[CheckLike]) -> CheckList:
    """Display one check or several (Checks or ``(name, holds, shown[, otherwise])`` tuples).

    Returns:
        The checks, as :class:`Check` objects, in order (a list).
    """
    items = [checks] if isinstance(checks, (Check, tuple)) else list(checks)
    out = CheckList(_as_check(item) for item in items)
    for c in out:
        _display(c)
    out._shown_in = _execution_count()
    return out


def expect(name: str, holds: bool, *, shown: str, otherwise: str = "") -> Check:
    """Build a check from this run's numbers and display it; returns the :class:`Check`."""
    c = check(name, holds, shown=shown, otherwise=otherwise)
    _display(c)
    return c


def parse_line(line: str) -> Check | None:
    """A check read back from its text line, or None when the line is not one.

    Text is ambiguous when a name contains ``": "``; prefer the metadata
    (:func:`checks_in_outputs`), which this falls back to only for printed checks.
    """
    line = line.strip()
    if not line or line[0] not in (HOLDS, FAILS) or ": " not in line:
        return None
    holds = line[0] == HOLDS
    name, _, rest = line[1:].strip().partition(": ")
    otherwise = ""
    if not holds and WHY in rest:
        rest, _, otherwise = rest.partition(WHY)
        if otherwise.startswith("(no explanation given"):
            otherwise = ""
    return Check(name, holds, rest, otherwise)


def _text_of(data: Any) -> str:
    return "".join(data) if isinstance(data, list) else str(data or "")


def checks_in_outputs(outputs: Iterable[Mapping[str, Any]]) -> list[Check]:
    """Every lesson check in a notebook cell's outputs (nbformat dicts), in order.

    Displayed checks are read from their metadata; printed ones (stdout streams) from their lines.
    """
    found: list[Check] = []
    for out in outputs:
        meta = out.get("metadata") or {}
        if isinstance(meta, Mapping) and METADATA_KEY in meta:
            fields = meta[METADATA_KEY]
            if isinstance(fields, str):
                fields = json.loads(fields)
            found.append(Check(str(fields["name"]), bool(fields["holds"]), str(fields["shown"]),
                               str(fields.get("otherwise", ""))))
        elif out.get("output_type") == "stream" and out.get("name") == "stdout":
            for line in _text_of(out.get("text")).splitlines():
                parsed = parse_line(line)
                if parsed is not None:
                    found.append(parsed)
    return found
