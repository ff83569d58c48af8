from __future__ import annotations

import math

import numpy as np
import pytest

from d2l_async.report import HEADER, Row, fmt_seconds, format_table, to_jsonable


def test_table_has_header_rule_and_aligned_columns():
    rows = [Row("sync vs async", "3.16 s vs 0.93 s", "1.2 s vs 0.3 s", "CPU engine, 1 virtual device (threads)"),
            Row("x", "—", "y", "z")]
    text = format_table(rows, total=200)  # wide enough for one line per row
    lines = text.splitlines()
    assert lines[0].startswith(HEADER[0]) and "the book" in lines[0]
    assert set(lines[1].replace(" ", "")) == {"-"}
    col = lines[0].index(HEADER[2])
    assert lines[2][col:].startswith("1.2 s vs 0.3 s") and lines[3][col:].startswith("y")


def test_long_cells_wrap():
    text = format_table([Row("a " * 40, "b", "c", "d")], width=20)
    assert len(text.splitlines()) > 3
    assert all(len(l.split("  ")[0]) <= 20 for l in text.splitlines()[2:])
    with pytest.raises(ValueError, match="width"):
        format_table([], width=3)


@pytest.mark.parametrize("s,expected", [(3.164, "3.16 s"), (0.034, "34 ms"), (4.56e-6, "4.56 µs"),
                                        (float("nan"), "n/a"), (None, "n/a")])
def test_fmt_seconds(s, expected):
    assert fmt_seconds(s) == expected


def test_to_jsonable():
    out = to_jsonable({"a": np.float64(1.5), "b": (1, np.int64(2)), "c": math.nan, 3: [math.inf], "d": object})
    assert out["a"] == 1.5 and out["b"] == [1, 2] and out["c"] is None and out["3"] == [None]
    assert isinstance(out["d"], str)


def test_useful_sources_blanks_entry_point_lines_only():
    from d2l_async.report import useful_sources
    from d2l_async.trace import Event, Trace

    evs = [Event("frontend", "block", "waitall", 0.0, 1.0, source="__main__.py:3: sys.exit(_main())"),
           Event("frontend", "block", "item", 1.0, 2.0, source="<blocker demo>:4: b.sum().item()"),
           Event("frontend", "block", "print", 2.0, 3.0, source="barriers.py:113: eng.waitall()")]
    out = useful_sources(Trace.from_events(evs))
    assert list(out["source"]) == ["", "<blocker demo>:4: b.sum().item()", "barriers.py:113: eng.waitall()"]
    empty = Trace.from_events([])
    assert useful_sources(empty) is empty
