"""The same lessons in JAX (d2l_async.experiments.in_jax, d2l_async.capture's jax_* helpers): the engine's
result types and checks, from JAX's own profiler trace.  Needs JAX (the ``[jax]`` extra, in ``make``'s dev
environment); without it only the tests of the missing-JAX error run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from d2l_async import lesson
from d2l_async.capture import have_jax
from d2l_async.experiments import blockers, barriers, asynchrony, in_jax
from d2l_async.experiments import AsynchronyResult, BarrierResult, BlockersResult, SyncAsyncResult
from d2l_async.trace import BACKEND_KINDS

#: JAX is imported by the tests that use it, not at collection (a second or more per worker process)
needs_jax = pytest.mark.skipif(not have_jax(), reason="JAX is not installed: pip install 'd2l-async[jax]'")


@pytest.fixture(scope="module", autouse=True)
def two_cpu_devices():
    """The barriers run needs two CPU devices, which JAX makes only if asked before its first operation:
    asked here, first (every JAX test module asks for the same two)."""
    if not have_jax():
        return None
    from d2l_async.capture import jax_cpu_devices

    return jax_cpu_devices(2)


def work(t):
    return t.where(kind=BACKEND_KINDS, lane=[l.name for l in t.backend_lanes])


def linked(t) -> bool:
    launches, execs = t.where(kind="launch"), work(t)
    return sorted(launches["flow"].tolist()) == sorted(execs["flow"].tolist()) and (execs["flow"] >= 0).all()


def all_explained(checks) -> bool:
    return all(isinstance(c, lesson.Check) and c.explained for c in checks)


@needs_jax
def test_asynchrony_in_jax_is_the_engine_result_and_checks():
    r = in_jax.run_asynchrony_jax(size=300, matmuls=4, repeat=2)
    assert isinstance(r, AsynchronyResult) and r.backend == "jax" and not r.virtual and "JAX" in r.device
    assert r.naive.synchronized is False and len(r.synced.raw) == 2
    execs = work(r.trace)
    assert list(execs["name"]) == ["jit_dot"] * 4 and linked(r.trace)
    assert r.trace.meta["source"] == "jax" and r.trace.meta["experiment"] == "asynchrony"
    checks = asynchrony.checks(r)
    assert [c.claim for c in checks] == ["01.naive-misses", "00.ran-ahead"]  # the engine's own claims
    assert all_explained(checks)


@needs_jax
def test_barriers_in_jax_put_the_chain_and_z_on_two_devices():
    r = in_jax.run_barriers_jax(long_ops=4, size=300, follow_ops=2, repeat=2)
    assert isinstance(r, BarrierResult) and r.backend == "jax"
    assert r.barrier_names == ("jax.block_until_ready(everything)", "z.block_until_ready()")
    assert len(r.waitall_next_runs) == len(r.wait_to_read_next_runs) == 2
    for t in (r.trace_waitall, r.trace_wait_to_read):
        assert [l.name for l in t.backend_lanes] == ["cpu:0 (XLA)", "cpu:1 (XLA)"]
        on1 = work(t).filter(work(t)["lane"] == "cpu:1 (XLA)")
        assert list(on1["name"]) == ["jit_matmul"] * 4  # the unrelated chain, alone on device 1
        assert linked(t)
    checks = barriers.checks(r)
    assert checks[0].claim == "03.narrow-sooner" and all_explained(checks)


@needs_jax
def test_blockers_in_jax_measure_each_blocker_and_report_the_named_waits():
    r = in_jax.run_blockers_jax(steps=20, size=200, repeat=2)
    assert isinstance(r, BlockersResult) and r.backend == "jax"
    assert tuple(r.per_call) == in_jax.JAX_BLOCKERS
    assert all(m.median > 0 for m in r.per_call.values())
    # every blocker of the demo is in the trace, named: a block where it waited, runtime where its value was ready
    named = r.trace.filter(np.isin(r.trace["name"].astype(str), in_jax.JAX_BLOCKERS))
    assert sorted(named["name"]) == sorted(in_jax.JAX_BLOCKERS)
    blocks = r.trace.where(kind="block")
    assert [(b.reason, b.source) for b in r.report] == list(zip(blocks["reason"], blocks["source"]))
    assert {b.source for b in r.report} <= set(in_jax.JAX_BLOCKER_DEMO.values())
    checks = blockers.checks(r) + [blockers.report_check(r.trace, expected=5, size=r.size, machine=r.machine)]
    assert {c.claim for c in checks} == {"04.item-asnumpy", "04.every-step", "04.each-waited"}
    assert all_explained(checks)


@needs_jax
def test_sync_async_in_jax_one_element_runs_inline():
    """XLA runs a program under 1000 flops on the calling thread: the 'asynchronous' loop is synchronous."""
    r = in_jax.run_sync_async_jax(ops=200, numel=1, repeat=2, trace_ops=100)
    assert isinstance(r, SyncAsyncResult) and r.backend == "jax" and r.eager is None
    assert len(work(r.trace_async)) == 100 and linked(r.trace_async)
    assert r.trace_async.meta["inline_executions"] == 100
    lessons = r.lessons()
    assert lessons[0].claim == "05.async-faster"
    assert all_explained(lessons + [r.queue_lesson()])
    if lessons[0].holds is not True:  # why asynchrony did not win, in JAX's terms: XLA ran the ops inline
        assert lessons[0].cause == "trace" and "inline" in lessons[0].otherwise


@needs_jax
def test_sync_async_in_jax_large_ops_are_queued_not_inline():
    r = in_jax.run_sync_async_jax(ops=100, numel=200_000, repeat=1, trace_ops=60, jit=True)
    assert r.trace_async.meta["inline_executions"] == 0
    assert "jax.jit" in r.sync.label and r.trace_async.meta["jit"] is True
    from d2l_async.analysis import queue_length_summary

    assert int(queue_length_summary(r.trace_async)["max"].max()) >= 2  # dispatched ahead of the executions


@needs_jax
def test_jax_wait_names_a_wait_and_jax_waitall_waits_for_the_device():
    import jax.numpy as jnp

    from d2l_async.capture import jax_capture, jax_wait, jax_waitall

    x = jnp.ones((400, 400))
    (x @ x).block_until_ready()

    def chain():
        a = x
        for _ in range(6):
            a = a @ x
        with jax_wait("print", "print(a)"):
            repr(a)
        return a

    t = jax_capture(chain)
    blocks = t.where(kind="block")
    assert list(zip(blocks["reason"], blocks["source"])) == [("print", "print(a)")]
    a = x
    for _ in range(8):
        a = a @ x
    jax_waitall()
    assert a.is_ready()


def test_bad_arguments_are_refused_before_jax_runs():
    with pytest.raises(ValueError, match="size"):
        in_jax.run_asynchrony_jax(size=0)
    with pytest.raises(ValueError, match="long_ops"):
        in_jax.run_barriers_jax(long_ops=-1)
    with pytest.raises(ValueError, match="steps"):
        in_jax.run_blockers_jax(steps=2.5)
    with pytest.raises(TypeError, match="jit"):
        in_jax.run_sync_async_jax(jit="yes")
    with pytest.raises(TypeError):
        in_jax.run_sync_async_jax(100)  # noqa: keyword-only


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_without_jax_the_error_says_how_to_install_it():
    out = _run("""
        import sys
        sys.modules["jax"] = None  # as if JAX were not installed
        from d2l_async.experiments import run_asynchrony_jax
        from d2l_async.capture import JaxMissing
        try:
            run_asynchrony_jax(size=10)
        except JaxMissing as e:
            print("MISSING:", e)
    """)
    assert out.returncode == 0, out.stderr
    assert "MISSING:" in out.stdout and 'pip install "d2l-async[jax]"' in out.stdout


def test_importing_the_package_does_not_import_jax():
    out = _run("""
        import sys
        import d2l_async, d2l_async.capture, d2l_async.experiments, d2l_async.trace
        print("jax" in sys.modules)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@needs_jax
def test_two_devices_asked_after_jax_started_with_one():
    out = _run("""
        import jax, jax.numpy as jnp
        (jnp.ones(3) + 1).block_until_ready()  # JAX starts with one CPU device
        from d2l_async.capture import jax_cpu_devices
        try:
            jax_cpu_devices(2)
        except RuntimeError as e:
            print("REFUSED:", e)
    """)
    assert out.returncode == 0, out.stderr
    assert "REFUSED:" in out.stdout and "xla_force_host_platform_device_count=2" in out.stdout
