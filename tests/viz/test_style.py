from __future__ import annotations

import pytest

from d2l_async.trace import Lane, LaneRole
from d2l_async.viz import style


@pytest.mark.parametrize("span,unit", [(5e-6, "µs"), (0.02, "ms"), (3.0, "s"), (float("nan"), "µs")])
def test_time_unit_fits_the_span(span, unit):
    assert style.time_unit(span)[0] == unit


def test_block_label_names_the_statement_and_line():
    assert style.block_label("print", "cell 3, line 12: print(z)") == "print(z) — line 12"
    assert style.block_label("waitall", "line 4: eng.waitall()") == "eng.waitall() — line 4"
    assert style.block_label("full queue", "line 7: y = x + 1") == "full queue: y = x + 1 — line 7"
    assert style.block_label("cudaStreamSynchronize", "") == "cudaStreamSynchronize"
    assert style.block_label("", "") == "blocked"
    assert style.block_label("print", "train.py:64: print(a)") == "print(a) — line 64"
    assert style.block_label("waitall", "<string>:8") == "waitall: <string>, line 8"
    assert style.block_label("print", "f.py:3: print(a)  # waits") == "print(a) — line 3"
    assert style.block_label("print", "f.py:3: print('#1')") == "print('#1') — line 3"
    assert len(style.block_label("print", "line 1: print(" + "x" * 100 + ")")) == 48


def test_virtual_lanes_say_so():
    assert style.lane_label(Lane("cpu:1 worker 0", LaneRole.BACKEND, virtual=True)) == "cpu:1 worker 0 (virtual)"
    assert style.lane_label(Lane("cuda:0 stream 7", LaneRole.BACKEND)) == "cuda:0 stream 7"


def test_palette_is_okabe_ito():
    assert set(style.KIND_COLORS.values()) <= set(style.OKABE_ITO.values())
    assert len(set(style.KIND_COLORS.values())) == len(style.KIND_COLORS)
