"""DDP overlap on a modelled link: the schedule is exact arithmetic; the backward pass is measured."""

from __future__ import annotations

import pytest

from d2l_async.experiments import modelled_link as ml


def test_schedule_packs_buckets_in_readiness_order_and_queues_them_on_the_link():
    link = ml.LinkModel(bytes_per_s=1e6, latency_s=0.0)  # 1 MB/s: a byte is a microsecond
    buckets, t_b, t_a = ml.schedule([1.0, 2.0, 3.0, 4.0], [1000, 1000, 1000, 1000], bucket_bytes=2000, end_s=4.5,
                                    link=link)
    # bucket 1 = gradients 1+2, ready at 2.0, 2 ms on the link; bucket 2 = 3+4, ready at 4.0
    assert buckets == [(2.0, 2.0, pytest.approx(2.002), 2000), (4.0, 4.0, pytest.approx(4.002), 2000)]
    assert t_b == 4.5  # the backward pass ends last: everything hidden
    assert t_a == pytest.approx(4.5 + 0.004)  # all gradients in one message after backward


def test_a_slow_link_queues_buckets_and_exposes_the_rest():
    link = ml.LinkModel(bytes_per_s=1e3, latency_s=0.001)
    buckets, t_b, t_a = ml.schedule([0.1, 0.2], [1000, 1000], bucket_bytes=1000, end_s=0.3, link=link)
    assert buckets[1][1] == pytest.approx(buckets[0][2])  # the second waits for the link
    assert t_b == pytest.approx(0.1 + 2 * 1.001) and t_a == pytest.approx(0.3 + 2.001)
    with pytest.raises(ValueError):
        ml.schedule([], [], bucket_bytes=1, end_s=1.0, link=link)
    with pytest.raises(ValueError):
        ml.LinkModel(bytes_per_s=0)


def test_run_measures_the_backward_and_says_modelled():
    m = ml.run_modelled_overlap(width=64, depth=3, batch=8, repeats=3, bucket_cap_mb=0.01)
    assert len(m.step_after_s) == len(m.step_bucketed_s) == 3
    assert all(b >= d and a > d for a, b, d in zip(m.step_after_s, m.step_bucketed_s, m.backward_s))
    assert "modelled" in m.trace.meta["modelled_label"] and any("modelled" in lane.name for lane in m.trace.lanes)
    checks = ml.checks(m)
    assert all("modelled link" in c.name and c.role == "modelled" for c in checks)
    assert checks[0].decided_by.startswith("compare:") and "paired" in checks[0].decided_by
