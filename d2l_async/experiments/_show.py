"""Results that display themselves: where the run ran, a few numbers, and its claims' checks.

A notebook cell calls an experiment and shows its result as the cell's last value; the result's
``_ipython_display_`` shows one line saying where it ran (a virtual device is labelled virtual), a
small table of the numbers the chapter's text refers to, and the checks of its claims
(:func:`d2l_async.lesson.show`, with their metadata), so no cell formats or unpacks result fields.
Outside IPython, :func:`summary_text` is the same as text.
"""

from __future__ import annotations

import html
from typing import Any, Iterable, Sequence

__all__ = ["Displayed", "DisplayedTuple", "summary_text", "summary_html", "ran_on"]

Rows = Sequence[tuple[str, Any]]


def summary_text(header: str, rows: Rows) -> str:
    """``header`` and ``label  value`` lines."""
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join([header, *(f"  {k:<{width}}  {v}" for k, v in rows)])


def summary_html(header: str, rows: Rows) -> str:
    """``header`` as a paragraph and the rows as a two-column table."""
    body = "".join(f"<tr><td style='text-align:left'>{html.escape(str(k))}</td>"
                   f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>" for k, v in rows)
    table = f"<table class='d2l-async-result'>{body}</table>" if rows else ""
    return f"<p>{html.escape(header)}</p>{table}"


class Displayed:
    """Mixin of a frozen result: ``_summary()`` gives ``(header, rows)``, ``checks()`` its checks."""

    def _summary(self) -> tuple[str, Rows]:  # pragma: no cover - every result defines it
        raise NotImplementedError

    def checks(self) -> list[Any]:  # pragma: no cover - every result defines it
        raise NotImplementedError

    def _ipython_display_(self) -> None:
        from IPython.display import display

        from d2l_async import lesson

        header, rows = self._summary()
        display({"text/plain": summary_text(header, rows), "text/html": summary_html(header, rows)}, raw=True)
        lesson.show(self.checks())


class DisplayedTuple(tuple):
    """A tuple of results that displays itself as :class:`Displayed` does (define ``_summary`` and ``checks``)."""

    _ipython_display_ = Displayed._ipython_display_


def ran_on(device: str, virtual: bool) -> str:
    """``Ran on: <device>`` with the virtual-device note where the devices are threads."""
    return f"Ran on: {device}" + (" (virtual devices: threads, not GPUs)" if virtual and "virtual" not in device
                                  else "")


def joined(items: Iterable[str]) -> str:
    return ", ".join(items)
