"""The book's published numbers, each with where it comes from.

These are the only numbers in the package that are typed in rather than measured.  The timings are
printed in the MXNet version of the section in the English edition of *Dive into Deep Learning*
(d2l.ai, §13.2 "Asynchronous Computation"): outputs of one run each on the machine that built the
book, which the text does not name — so nothing here says what hardware it was.  The thread counts
are from the section's prose.  Everything else the notebooks and the report print is measured at run
time.  Show them only next to the label :attr:`BookNumber.label` gives them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

__all__ = ["BookNumber", "BOOK", "book_number"]

_SECTION = "D2L, English edition (d2l.ai), §13.2 Asynchronous Computation"


@dataclass(frozen=True)
class BookNumber:
    """One number printed in the book.

    Attributes:
        key: short identifier used across the package (``"sync_async.sync"``).
        value: the number as printed.
        unit: ``"s"`` for seconds, ``"threads"``, ...
        what: what was measured, in the book's words where possible.
        source: section and framework, e.g. ``"D2L §13.2.3 Improving Computation (MXNet)"``.
    """

    key: str
    value: float
    unit: str
    what: str
    source: str

    @property
    def label(self) -> str:
        """How to show it: always says it is the book's number."""
        return f"the book's {self.value:g} {self.unit} ({self.source})"


_NUMBERS = (
    BookNumber("sync_async.sync", 3.16, "s", "10,000 × y = x + 1, wait_to_read() after each (synchronous)",
               f"{_SECTION}, §13.2.3 Improving Computation (MXNet)"),
    BookNumber("sync_async.async", 0.93, "s", "10,000 × y = x + 1, one waitall() at the end (asynchronous)",
               f"{_SECTION}, §13.2.3 Improving Computation (MXNet)"),
    BookNumber("sync_async.ratio", round(3.16 / 0.93, 2), "×", "synchronous / asynchronous time (3.16 s / 0.93 s)",
               f"{_SECTION}, §13.2.3 Improving Computation (MXNet)"),
    BookNumber("blockers.asnumpy", 0.0340, "s", "numpy conversion: b = np.dot(a, a); b.asnumpy() "
               "(includes the matrix product)", f"{_SECTION}, §13.2.2 Barriers and Blockers (MXNet)"),
    BookNumber("blockers.item", 0.0445, "s", "scalar conversion: b = np.dot(a, a); b.sum().item() "
               "(includes the matrix product)", f"{_SECTION}, §13.2.2 Barriers and Blockers (MXNet)"),
    BookNumber("scheduling.threads_low", 4, "threads", "even regular laptops have 4 threads or more",
               f"{_SECTION}, §13.2.3 Improving Computation (MXNet tab; text, no measurement)"),
    BookNumber("scheduling.threads_high", 256, "threads", "on multi-socket servers this number can exceed 256",
               f"{_SECTION}, §13.2.3 Improving Computation (MXNet tab; text, no measurement)"),
)

#: key -> :class:`BookNumber`; read-only.
BOOK: Mapping[str, BookNumber] = MappingProxyType({n.key: n for n in _NUMBERS})


def book_number(key: str) -> BookNumber:
    """The book's number called ``key``; a ValueError lists the known keys.

    Returns:
        The frozen :class:`BookNumber` (key, value, unit, what it measured, its source in the book).
    """
    try:
        return BOOK[key]
    except (KeyError, TypeError):  # TypeError: an unhashable key, a list
        raise ValueError(f"no book number {key!r}; known: {sorted(BOOK)}") from None
