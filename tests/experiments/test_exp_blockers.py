from __future__ import annotations

import pytest

from d2l_async.experiments import BLOCKER_DEMO, BLOCKERS, run_blockers
from d2l_async.experiments.blockers import BLOCKER_DEMO as DEMO


@pytest.fixture(scope="module")
def result():
    return run_blockers(steps=40, size=100, repeat=1, backend="engine")


def test_report_lists_each_blocker_with_its_source_line(result):
    assert [e.reason for e in result.report] == list(BLOCKERS)
    lines = DEMO.splitlines()
    calls = {"print": "print(b)", "item": ".item()", "asnumpy": ".asnumpy()", "numpy": "b.numpy()",
             "float": "float(", "bool": "if b.sum()"}
    for e in result.report:
        assert e.source.startswith("<blocker demo>:"), e.source
        lineno = int(e.source.split(":")[1])
        assert calls[e.reason] in lines[lineno - 1]
        assert e.seconds >= 0


def test_every_blocker_measured(result):
    assert tuple(result.per_call) == BLOCKERS
    assert set(result.book_style) == {"asnumpy", "item"}
    assert all(len(m.raw) == 1 for m in result.per_call.values())
    assert result.every_step.label == "convert every step"
    assert result.once_at_end.label == "convert once at the end"
    assert result.virtual and "virtual" in result.device


def test_blockers_cost_more_than_no_blocker(result):
    # a step with a blocker waits for the backend; a step without one only queues
    assert sum(result.cost(b) for b in BLOCKERS) > 0


def test_cost_of_unknown_blocker(result):
    with pytest.raises(ValueError, match="measured"):
        result.cost("len")


def test_bad_arguments():
    for kwargs in ({"steps": 0}, {"size": 0}, {"repeat": -1}, {"backend": "npu"}):
        with pytest.raises(ValueError):
            run_blockers(**kwargs)
    assert BLOCKER_DEMO is DEMO
