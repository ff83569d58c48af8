"""Lean trace columns: strings stored once and referred to by number, tuples stored flat.

A recorded engine run of 1M ops is a trace of 2M rows.  As plain numpy object columns it held a
pointer per row in each of nine columns, and a fresh tuple (and string) per row in ``deps``,
``reads`` and ``writes``: about 370 bytes per row, 0.8 GB for 1M ops on a 2 GB Binder pod.  Here:

* :class:`Coded` -- a categorical column: ``codes`` (small ints, one per row) into ``categories``
  (each distinct string once): ``lane``, ``kind``, ``name``, ``device``, ``source``, ``reason``;
* :class:`Ragged` -- a column of tuples stored flat: ``counts`` (one per row) and ``flat`` (all the
  values, row after row), with a ``decode`` that makes one row's tuple: ``deps``, ``reads``,
  ``writes``.

:class:`LeanColumns` is the trace's mapping of columns: it hands out ordinary numpy arrays, made
from a lean column the first time it is read and kept from then on (so every reader of
``trace["lane"]`` is unchanged), and it filters and reorders the lean columns without decoding
them.  A trace whose tuple columns nobody reads never pays for the tuples.  numpy only.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

import numpy as np

__all__ = ["Coded", "Ragged", "LeanColumns", "segments"]


def segments(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Indices ``starts[i], ..., starts[i] + counts[i] - 1`` for every i, concatenated.

    Returns:
        A flat int32 array of the indices (int64 when they or their count reach 2**31); empty when every count is 0.
    """
    for name, a in (("starts", starts), ("counts", counts)):
        if not isinstance(a, np.ndarray) or a.dtype.kind not in "iu":
            raise TypeError(f"{name} must be an integer numpy array, got {type(a).__name__}")
    if len(counts) and int(counts.min()) < 0:
        raise ValueError(f"counts must be >= 0, got {int(counts.min())}")
    total = int(counts.sum(dtype=np.int64))
    dtype = np.int32 if total < 2**31 and (not len(starts) or int(starts.max()) < 2**31) else np.int64
    if total == 0:
        return np.zeros(0, dtype)
    begins = np.concatenate([np.zeros(1, dtype), np.cumsum(counts, dtype=dtype)[:-1]])
    out = np.repeat(starts.astype(dtype) - begins, counts)
    out += np.arange(total, dtype=dtype)
    return out


class Coded:
    """A categorical column: row i is ``categories[codes[i]]``."""

    __slots__ = ("codes", "categories")

    def __init__(self, codes: np.ndarray, categories: np.ndarray) -> None:
        self.codes = codes
        self.categories = categories

    def __len__(self) -> int:
        return len(self.codes)

    def take(self, index: np.ndarray) -> "Coded":
        return Coded(self.codes[index], self.categories)

    def decode(self) -> np.ndarray:
        return self.categories[self.codes]

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.categories.nbytes


class Ragged:
    """A column of tuples, flat: row i holds ``flat[offsets[i]:offsets[i + 1]]``, each value passed
    through ``value`` (None: as it is) when the tuple is made."""

    __slots__ = ("counts", "flat", "value", "_offsets")

    def __init__(self, counts: np.ndarray, flat: np.ndarray, value: Callable[[Any], Any] | None = None) -> None:
        self.counts = counts
        self.flat = flat
        self.value = value
        self._offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.counts)

    @property
    def offsets(self) -> np.ndarray:
        if self._offsets is None:
            dtype = np.int32 if len(self.flat) < 2**31 else np.int64  # half the bytes for any real trace
            self._offsets = np.concatenate([np.zeros(1, dtype), np.cumsum(self.counts, dtype=dtype)])
        return self._offsets

    def take(self, index: np.ndarray) -> "Ragged":
        counts = self.counts[index]
        rows = np.nonzero(counts)[0]  # most rows of a trace hold no tuple: only the others move values
        if not len(rows):
            return Ragged(counts, self.flat[:0], self.value)
        starts = self.offsets[:-1][index[rows]]
        return Ragged(counts, self.flat[segments(starts, counts[rows])], self.value)

    def decode(self) -> np.ndarray:
        n = len(self.counts)
        out = np.empty(n, dtype=object)
        out.fill(())
        rows = np.nonzero(self.counts)[0]
        if not len(rows):
            return out
        convert, cache = self.value, {}

        def value(v: Any) -> Any:  # each distinct value converted once, for both paths below
            c = cache.get(v, cache)
            if c is cache:
                c = cache[v] = v if convert is None else convert(v)
            return c

        ends = self.offsets[1:]
        one = rows[self.counts[rows] == 1]
        if len(one):  # the common case: one value; one tuple per distinct value, shared
            uniq, inverse = np.unique(self.flat[ends[one] - 1], return_inverse=True)
            made = np.empty(len(uniq), dtype=object)
            for k, v in enumerate(uniq.tolist()):
                made[k] = (value(v),)
            out[one] = made[inverse.reshape(-1)]
        many = rows[self.counts[rows] > 1]
        if len(many):
            values = self.flat.tolist()
            for i, end, cnt in zip(many.tolist(), ends[many].tolist(), self.counts[many].tolist()):
                out[i] = tuple(map(value, values[end - cnt:end]))
        return out

    @property
    def nbytes(self) -> int:
        return self.counts.nbytes + self.flat.nbytes + (self._offsets.nbytes if self._offsets is not None else 0)


class LeanColumns(Mapping):
    """A trace's columns: numpy arrays, or lean columns decoded (and kept) on first read."""

    def __init__(self, columns: Mapping[str, Any], n: int) -> None:
        self._cols: dict[str, Any] = dict(columns)
        self.n = n

    def __getitem__(self, name: str) -> np.ndarray:
        col = self._cols[name]
        if isinstance(col, (Coded, Ragged)):
            col = col.decode()
            col.flags.writeable = False
            self._cols[name] = col
        return col

    def __iter__(self) -> Iterator[str]:
        return iter(self._cols)

    def __len__(self) -> int:
        return len(self._cols)

    def raw(self, name: str) -> Any:
        """The column as stored: an array, a :class:`Coded` or a :class:`Ragged` (not decoded)."""
        return self._cols[name]

    def take(self, index: np.ndarray) -> "LeanColumns":
        """Rows ``index`` (an int array), in that order, lean columns kept lean."""
        out = {}
        for name, col in self._cols.items():
            c = col.take(index) if isinstance(col, (Coded, Ragged)) else col[index]
            if isinstance(c, np.ndarray):
                c.flags.writeable = False
            out[name] = c
        return LeanColumns(out, len(index))

    @property
    def nbytes(self) -> int:
        """Bytes the columns hold as stored now (object columns: their pointers only)."""
        return sum(c.nbytes for c in self._cols.values())

    def lane_names(self) -> set[str]:
        """The distinct lanes, without decoding a coded lane column."""
        col = self._cols["lane"]
        if isinstance(col, Coded):
            return {str(x) for x in col.categories[np.unique(col.codes)].tolist()}
        return {str(x) for x in set(col.tolist())}
