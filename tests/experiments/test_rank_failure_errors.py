"""Notebook 10's first launch meets every launcher error as a result with its check, never as an exception."""

from __future__ import annotations

import math

import pytest

import d2l_async.distributed as dd
from d2l_async.experiments import run_rank_failure


@pytest.mark.parametrize("error", [
    dd.RankTimeout("the ranks did not start within 60 s (the first run of a session starts a fork server)"),
    dd.RankDied(1, 4242, 3),
])
def test_a_launch_that_ends_without_the_ranks_error_is_a_failed_check(monkeypatch, error):
    def launch(*args, **kwargs):
        raise error

    monkeypatch.setattr(dd, "launch", launch)
    r = run_rank_failure(timeout=60)
    assert math.isinf(r.latency_s) and r.message.startswith(type(error).__name__)
    (check,) = r.checks()
    assert check.holds is False and check.cause in ("no-spare-cpu", "interpreter-lock")
