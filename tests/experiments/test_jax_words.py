"""05's checks on a JAX result say JAX's reasons: XLA ran the ops inline, or its threads ran outside the
interpreter lock -- never the engine's Python bookkeeping.  Synthetic results: no JAX, no timing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from d2l_async._machine import Machine
from d2l_async.experiments import CostModel
from d2l_async.experiments._cpu import CpuTimes
from d2l_async.experiments._sync_async_lessons import run_checks
from d2l_async.trace import Event, Lane, LaneRole, Trace


def machine(usable: float = 2.0, busy: float = 0.0) -> Machine:
    return Machine(usable_cpus=usable, affinity_cpus=int(max(usable, 1)), quota_cpus=None, host_cpus=2,
                   load_avg=busy, mem_available_bytes=8 << 30, mem_limit_bytes=None, busy_cpus=busy)


def traced(n: int, inline: int) -> Trace:
    """A JAX-like trace of ``n`` executions on ``cpu:0 (XLA)``, ``inline`` of them run inline (the reader's meta)."""
    lanes = [Lane("python", LaneRole.FRONTEND), Lane("cpu:0 (XLA)", LaneRole.BACKEND, "cpu:0", stream=0)]
    events = [Event("cpu:0 (XLA)", "op", "jit_add", i * 1e-5, i * 1e-5 + 1e-6, issue=i * 1e-5, device="cpu:0")
              for i in range(n)]
    return Trace.from_events(events, lanes, meta={"source": "jax", "inline_executions": inline})


def result(backend: str, inline: int, *, sync_s: float = 12e-3, async_s: float = 11e-3, m: Machine | None = None):
    n = 1000
    model = CostModel(n=n, t1=11e-6, t2=0.5e-6, t3=0.5e-6, t2_source="op duration")
    def runs(s: float) -> tuple[float, ...]:
        return (0.9 * s, s, 1.1 * s)

    return SimpleNamespace(model=model, ops=n, backend=backend, sync=SimpleNamespace(median=sync_s, raw=runs(sync_s)),
                           async_=SimpleNamespace(median=async_s, raw=runs(async_s)), ratio=sync_s / async_s,
                           cpu_async=CpuTimes(wall=3 * async_s, frontend=3 * async_s, process=3 * async_s),
                           machine=m or machine(), trace_async=traced(100, inline))


def test_ops_xla_ran_inline_are_the_reason_asynchrony_did_not_win():
    (faster,) = run_checks(result("jax", inline=100, sync_s=6e-3))
    assert faster.holds is False and faster.cause == "trace"
    assert "100 of the 100 traced ops inline" in faster.otherwise


def test_queued_jax_ops_on_spare_cpus_do_not_blame_the_engines_python():
    (faster,) = run_checks(result("jax", inline=0, sync_s=6e-3))
    assert faster.holds is False and faster.cause == "trace"  # XLA's threads, not the interpreter lock
    assert "interpreter-lock" != faster.cause


def test_the_engine_keeps_its_own_reason():
    (faster,) = run_checks(result("engine", inline=0, sync_s=6e-3))
    assert faster.holds is False and faster.cause in ("interpreter-lock", "no-spare-cpu")


@pytest.mark.parametrize("sync_s, holds", [(6e-3, False), (11.2e-3, None)])
def test_a_synchronous_loop_in_fact_is_said_when_asynchrony_did_not_win(sync_s, holds):
    (faster,) = run_checks(result("jax", inline=100, sync_s=sync_s))
    assert faster.holds is holds and faster.cause == "trace"
    assert "synchronous in fact" in faster.otherwise
