"""Guard rails: exact cost estimates, refusals with a message, bad input rejected."""

from __future__ import annotations

import pytest

from d2l_async.widgets import _guards as g

GB = 2**30


def test_tensor_and_workload_bytes_are_exact():
    assert g.tensor_bytes(1000) == 4_000_000
    assert g.tensor_bytes(1000, dtype_bytes=8) == 8_000_000
    assert g.workload_bytes(1024, 3) == 3 * 1024 * 1024 * 4
    assert g.ops_bytes(10, per_op=100) == 1000


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True, None])
def test_estimators_reject_bad_sizes(bad):
    with pytest.raises(ValueError, match="size"):
        g.tensor_bytes(bad)


def test_check_bytes_refuses_over_the_fraction_only():
    assert g.check_bytes(GB, what="x", available=4 * GB, fraction=0.5) is None
    msg = g.check_bytes(3 * GB, what="size=30000", available=4 * GB, fraction=0.5)
    assert msg is not None and "size=30000" in msg and "smaller" in msg
    assert g.check_bytes(10**18, what="x", available=None) in (None, g.check_bytes(10**18, what="x"))
    with pytest.raises(ValueError, match="fraction"):
        g.check_bytes(1, what="x", available=1, fraction=0)


def test_unknown_memory_never_refuses():
    guard = g.memory_guard(available=lambda: None)
    assert guard({"size": 10**6}) is None


def test_memory_guard_uses_size_and_live_tensors():
    guard = g.memory_guard(size="size", live_tensors="n_live", available=lambda: 2 * GB, fraction=0.5)
    assert guard({"size": 4096, "n_live": 10}) is None  # 640 MiB < 1 GiB
    refusal = guard({"size": 16384, "n_live": 2})  # 2 GiB > 1 GiB
    assert refusal is not None and "16384" in refusal
    assert guard({"other": 1}) is None  # a dashboard without that control is not judged


def test_ten_million_ops_do_not_fit_a_2gb_binder():
    guard = g.ops_guard(available=lambda: 2 * GB)
    assert guard({"n_ops": 10**7}) is not None
    assert guard({"n_ops": 10**4}) is None


def test_all_guards_returns_the_first_refusal():
    guard = g.all_guards(lambda v: None, lambda v: "first", lambda v: "second")
    assert guard({}) == "first"
    assert g.all_guards()({}) is None


def test_available_memory_reads_this_machine():
    free = g.available_memory()
    assert free is None or free > 0


def test_format_bytes():
    assert g.format_bytes(512) == "512 B"
    assert g.format_bytes(1536) == "1.5 KiB"
    assert g.format_bytes(3 * GB) == "3.0 GiB"


def test_matmul_flops_and_the_time_guard():
    assert g.matmul_flops(10) == 2000 and g.matmul_flops(10, 3) == 6000
    assert g.cpu_flops() > 1e6 and g.cpu_flops() is g.cpu_flops()  # measured once, cached
    guard = g.time_guard(lambda v: v["n"] * 1.0, limit_s=10)
    assert guard({"n": 5}) is None
    refusal = guard({"n": 100})
    assert refusal is not None and "100 s" in refusal
    with pytest.raises(ValueError, match="limit_s"):
        g.time_guard(lambda v: 0, limit_s=0)


def test_ready_made_guards_refuse_minutes_of_matrix_products():
    from d2l_async.widgets import dashboards as D

    guard = D._products_guard("size", lambda v: 8 * v["matmuls"])
    assert guard({"size": 64, "matmuls": 1}) is None
    assert "choose smaller" in guard({"size": 4096, "matmuls": 50})
    assert guard({"size": 4096, "matmuls": 50, "backend": "cuda"}) is None  # not judged by the CPU's rate


def test_time_estimate_is_the_same_kernel_at_the_requested_size():
    # sizes above CALIBRATION_MAX are timed at the cap and scaled by n**3: exactly 8x per doubling
    big = g.CALIBRATION_MAX * 2
    assert g.matmul_seconds(big) == pytest.approx(8 * g.matmul_seconds(g.CALIBRATION_MAX), rel=1e-9)
    assert g.matmul_seconds(big, 3) == pytest.approx(3 * g.matmul_seconds(big), rel=1e-9)
    # one measurement per size and time window, so one setting gets one answer
    assert g.matmul_rate(128) == g.matmul_rate(128)


def test_calibration_is_renewed_after_its_window(monkeypatch):
    monkeypatch.setattr(g, "_rates", {64: (1.0, 0.0)})  # a stale, absurd rate from long ago
    assert g.matmul_rate(64) > 1e6  # measured again
    assert g.cpu_flops() > 1e6


def test_memory_message_names_the_container_limit(monkeypatch):
    import d2l_async._machine as machine

    monkeypatch.setattr(machine, "mem_available", lambda root="/": (GB, 2 * GB))
    assert g.available_memory() == GB
    msg = g.check_bytes(GB, what="size=16384")
    assert msg is not None and "1.0 GiB of memory free now (container limit 2.0 GiB)" in msg
    monkeypatch.setattr(machine, "mem_available", lambda root="/": (0, None))
    assert g.available_memory() is None  # unknown: guards let the run go
