"""The plain-torch lesson checks are pure functions of the numbers: both outcomes, each explained by a cause."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from d2l_async.torch_async import lessons

M = SimpleNamespace(usable_cpus=1.0, spare_cpus=0.0, load_avg=3.5)


def test_returned_before_done():
    (good,) = lessons.returned_before_done(0.002, 1.0, 0.9, 20, M)
    assert good.holds and good.claim == "01.pt-returns"
    (bad,) = lessons.returned_before_done(0.5, 0.6, 0.1, 20, M)
    assert bad.holds is False and bad.explained and bad.cause == "no-spare-cpu"
    assert bad.number("eager_s") == 0.1  # eager torch's time: context, kept with the check


def test_narrow_waits():
    assert [c.holds for c in lessons.narrow_waits(0.01, 1.0, 0.95, 1.0, M)] == [True, True]
    bad = lessons.narrow_waits(0.9, 1.0, 0.1, 1.0, M)
    assert [c.holds for c in bad] == [False, False] and all(c.explained for c in bad)
    assert [c.cause for c in bad] == ["no-spare-cpu", "bug"]


def test_blockers_recorded():
    blocks = [("print", "In[3]:2: print(b)", 0.05), ("item", "In[3]:3: b.item()", 0.04),
              ("item", "In[3]:4: float(b)", 0.04), ("waitall", "", 0.0)]
    (ok,) = lessons.blockers_recorded(blocks, ["print", "item", "item"], 0.05, M)
    assert ok.holds and ok.claim == "04.pt-each-waited"
    (bad,) = lessons.blockers_recorded(blocks[:1] + [("item", "", 0.001)] * 2, ["print", "item", "item", "numpy"],
                                       0.05, M)
    assert bad.holds is False and bad.cause == "bug"  # a wait without its source line
    (missing,) = lessons.blockers_recorded(blocks, ["print", "item", "item", "numpy"], 0.05, M)
    assert missing.holds is False and (missing.number("recorded numpy"), missing.number("expected numpy")) == (0, 1)
    assert (missing.number("recorded item"), missing.number("expected item")) == (2, 2)
    assert ok.number("product_s") == 0.05
    # every wait under its own line: float()'s wait is not counted as .item()'s
    assert (ok.number("waits"), ok.number("lines")) == (3, 3)


def test_increments():
    assert [c.holds for c in lessons.increments(3.0, 0.3, 0.05, 10_000, M)] == [True]
    (bad,) = lessons.increments(0.3, 0.9, 2.0, 10_000, M)
    assert bad.holds is False and bad.explained and "compare:" in bad.decided_by and bad.cause == "no-spare-cpu"
    # one run each, 1.5x apart: inside what one run can tell (2x): can't tell, not ✔
    (unsure,) = lessons.increments(0.3, 0.2, 0.05, 10_000, M)
    assert unsure.holds is None and unsure.cause == "spread"
    # the same 1.5x from three interleaved runs each, tightly grouped: decided
    (rep,) = lessons.increments((0.30, 0.31, 0.29), (0.20, 0.21, 0.19), (0.05,) * 3, 10_000, M)
    assert rep.holds is True and rep.decided_by.startswith("compare: bootstrap")


def test_one_stall_that_decides_is_named():
    from d2l_async.trace import Lane, LaneRole, Trace

    sync = [i * 20e-6 for i in range(50)]  # the synchronous loop, then the asynchronous one with one stall
    t = sync[-1] + 0.05  # the untimed gap between the loops is not counted
    asyn = [t + i * 20e-6 + (0.3 if i >= 25 else 0.0) for i in range(50)]
    starts = sync + asyn
    trace = Trace.from_columns({"id": list(range(100)), "lane": ["frontend"] * 100, "kind": ["launch"] * 100,
                                "name": ["push"] * 100, "start": starts, "end": [s + 5e-6 for s in starts]},
                               [Lane("frontend", LaneRole.FRONTEND)], {})
    stall, share = lessons.largest_stall(trace, (50, 50))
    assert abs(stall - (0.3 + 20e-6)) < 1e-9 and share > 0.9
    assert lessons.largest_stall(trace)[0] == stall  # over the whole trace too (the loops' gap is 50 ms)
    c = lessons.increments(0.3, 0.4, 0.05, 50, M, trace=trace)[0]
    assert c.holds is None and c.cause == "trace" and c.number("stall_s") == pytest.approx(0.3 + 20e-6)


def test_one_comparison_one_ratio_direction():
    """A notebook once read "(0.75x)" in the numbers and "ratio 1.34" in the spread of one check."""
    from tests.one_core import rules

    c = lessons.increments((0.25, 0.26, 0.24), (0.33, 0.36, 0.31), (0.05,) * 3, 10_000, M)[0]
    assert c.number("a") == "synchronous" and rules.check_problems(c) == []


@pytest.mark.parametrize("fn, args", [(lessons.returned_before_done, (0.5, 0.6, 0.1, 20)),
                                      (lessons.narrow_waits, (0.9, 1.0, 0.1, 1.0)),
                                      (lessons.increments, (0.3, 0.9, 2.0, 10_000))])
def test_every_line_is_short(fn, args):
    assert all(c.words <= 40 for c in fn(*args, M))
