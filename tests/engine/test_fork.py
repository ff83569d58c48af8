"""A child made by ``os.fork()`` never waits for an engine's workers: they stayed in the parent.

Each case runs in a fresh interpreter (a fork of pytest's own process would copy its threads'
state too), with a timeout on the whole script and on each child: before the fork hook the child's
first blocker waited for ever, so a hang here fails as a timeout, never as a stuck test run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no os.fork on this platform")

#: runs ``child()`` in a forked child; prints the child's JSON answer (or "TIMEOUT") and the parent's
HARNESS = textwrap.dedent("""
    import json, os, signal, sys, time

    def in_child(child, limit=20.0):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                out = child()
            except BaseException as exc:
                out = {"error": type(exc).__name__, "message": str(exc)}
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        end = time.monotonic() + limit
        while time.monotonic() < end:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "TIMEOUT"
        data = os.read(r, 1 << 20)
        os.close(r)
        return json.loads(data)
""")


def run(body: str) -> dict:
    code = HARNESS + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_push_in_the_child_of_a_used_engine_is_a_clear_error():
    res = run("""
        import torch
        from d2l_async.engine import ThreadedEngine
        eng = ThreadedEngine(workers=2)
        x = eng.array(torch.ones(3))
        y = x + 1
        eng.waitall()
        parent = os.getpid()

        def child():
            before = y.asnumpy().tolist()  # finished before the fork: the child has a copy
            z = y * 2                       # needs a worker: refused
            return {"before": before, "z": repr(z)}
        print(json.dumps({"child": in_child(child), "parent": (y * 2).asnumpy().tolist(), "pid": parent}))
        eng.shutdown()
    """)
    child = res["child"]
    assert child != "TIMEOUT"
    assert child["error"] == "EngineError"
    assert "belongs to the parent process" in child["message"] and f"pid {res['pid']}" in child["message"]
    assert "spawn" in child["message"]  # what to do
    assert res["parent"] == [4.0, 4.0, 4.0]  # the parent's engine is untouched


def test_a_blocker_in_the_child_on_an_op_running_at_the_fork_raises_instead_of_waiting():
    res = run("""
        import threading, torch
        from d2l_async.engine import ThreadedEngine
        eng = ThreadedEngine(workers=1)
        started, release = threading.Event(), threading.Event()

        def slow(out):
            started.set()
            release.wait(30)
            out += 1
        x = eng.array(torch.zeros(2))
        eng.push(slow, writes=(x,))
        assert started.wait(10)

        def child():
            t0 = time.monotonic()
            try:
                x.wait_to_read()
            except Exception as exc:
                return {"error": type(exc).__name__, "message": str(exc), "s": time.monotonic() - t0}
            return {"read": True}
        out = in_child(child)
        release.set()
        print(json.dumps({"child": out, "parent": x.asnumpy().tolist()}))
        eng.shutdown()
    """)
    child = res["child"]
    assert child != "TIMEOUT", "the child's blocker waited for a worker that stayed in the parent"
    assert child["error"] == "EngineError" and "wait_to_read" in child["message"]
    assert child["s"] < 5.0
    assert res["parent"] == [1.0, 1.0]


def test_a_fork_inside_an_open_asynchronous_block_refuses_at_the_first_op_and_the_block_ends():
    res = run("""
        import threading, torch
        import d2l_async

        with d2l_async.asynchronous() as rt:
            x = torch.ones(200, 200)
            y = x @ x
            ready = float(y.sum().item())     # finished before the fork
            z = y @ y                         # maybe still queued at the fork

            def child():  # every op of the block is the runtime's: the first one is refused
                t0 = time.monotonic()
                try:
                    float((z + 1).sum().item())
                except Exception as exc:
                    return {"error": type(exc).__name__, "message": str(exc), "s": time.monotonic() - t0}
                return {"returned": True}
            out = in_child(child)
            total = float(z.sum().item())
        print(json.dumps({"child": out, "ready": ready, "total": total}))
    """)
    child = res["child"]
    assert child != "TIMEOUT", "the child's first op waited for the parent's worker"
    assert child["error"] == "EngineError" and "belongs to the parent process" in child["message"]
    assert child["s"] < 5.0
    assert res["ready"] == 200.0 * 200 * 200
    assert res["total"] == 200.0 ** 4 * 200  # the parent's block carried on


def test_the_child_leaves_a_with_block_and_gets_a_fresh_default_engine():
    res = run("""
        import torch
        from d2l_async.engine import ThreadedEngine, get_engine, live_engines, waitall_all
        get_engine().array(torch.ones(1)).wait_to_read()

        def child():
            with ThreadedEngine() as eng:
                eng.array(torch.ones(1)) + 1
                # the block above is the child's own engine: it works
            t0 = time.monotonic()
            waitall_all(timeout=5)            # the parent's engines are not the child's to wait for
            eng2 = get_engine()               # a new default engine, with its own workers
            v = (eng2.array(torch.ones(2)) * 3).asnumpy().tolist()
            return {"live": len(live_engines()), "v": v, "s": time.monotonic() - t0}

        outer = ThreadedEngine()
        with outer:
            outer.array(torch.ones(1)) + 1
            out = in_child(lambda: (lambda r: (outer.__exit__(None, None, None), r)[1])(child()))
        print(json.dumps({"child": out}))
    """)
    child = res["child"]
    assert child != "TIMEOUT"
    assert child["v"] == [3.0, 3.0]
    assert child["live"] == 1  # the child's default engine only: the parent's two are orphans there
    assert child["s"] < 5.0


def test_a_naive_engine_and_a_barrier_with_work_pending_refuse_in_the_child():
    res = run("""
        import threading, torch
        from d2l_async.engine import NaiveEngine, ThreadedEngine
        naive = NaiveEngine()
        a = naive.array(torch.ones(1)) + 1
        eng = ThreadedEngine()
        gate = threading.Event()
        eng.push(lambda: gate.wait(30))

        def child():
            out = {}
            for name, call in (("naive push", lambda: naive.array(torch.ones(1)) + 1),
                               ("waitall", lambda: eng.waitall(timeout=5))):
                try:
                    call()
                    out[name] = "returned"
                except Exception as exc:
                    out[name] = type(exc).__name__
            return out
        out = in_child(child)
        gate.set()
        eng.shutdown()
        print(json.dumps({"child": out, "a": a.asnumpy().tolist()}))
    """)
    assert res["child"] == {"naive push": "EngineError", "waitall": "EngineError"}
    assert res["a"] == [2.0]
