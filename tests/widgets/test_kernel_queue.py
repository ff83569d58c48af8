"""A real kernel, control changes sent as a front end sends them: the last value wins, an interrupt clears the queue.

The kernel (ipykernel, started by jupyter_client) builds a dashboard whose experiment takes about a second;
the test then sends ``comm_msg`` updates for the slider's model on the kernel's shell channel, exactly the
messages a browser sends when a reader drags it, faster than the experiment runs.  Nothing here reaches into
the dashboard's insides except to read its counters at the end.
"""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

SETUP = r"""
import json, time
from pathlib import Path
from d2l_async.experiments.deadline import checkpoint
from d2l_async.widgets import Dashboard, int_slider, dropdown
import plotly.graph_objects as go

MARK = Path({mark!r})
HOLD = not {checkpoints}  # the interrupt test holds its first changed run (see experiment)

def experiment(*, n):
    if n != 1:
        MARK.write_text(str(n))  # the test waits for this: a run with a changed value has started
    if n != 1 and HOLD:
        # the interrupt test: hold the run until the kernel's own queue shows the changes sent behind it,
        # then say so and go on working until the interrupt
        from d2l_async.widgets._kernel import pending_updates
        until = time.monotonic() + 60
        while len(pending_updates([dash.controls["n"].model_id]) or []) < 5 and time.monotonic() < until:
            time.sleep(0.01)
        MARK.with_name("queued").write_text("5")
        for _ in range(6000):
            time.sleep(0.01)
    for i in range(40):  # ~1 s of work in 25 ms steps
        if {checkpoints}:
            checkpoint(i, 40)
        time.sleep(0.025)
    return n

control = ({{"slider": lambda: int_slider("n", 1, 1, 50), "selection": lambda: dropdown("n", list(range(1, 51)), 1)}}
           [{kind!r}]())
dash = Dashboard(experiment, {{"n": control}},
                 figures={{"line": lambda n: go.Figure(go.Scatter(y=list(range(n + 1))))}}, mode="figurewidget")
print(json.dumps({{"model_id": dash.controls["n"].model_id}}))
"""

REPORT = ("json.dumps(dict(result=dash.result, runs=dash.runs, skipped=dash.skipped, superseded=dash.superseded, "
          "dropped=dash.dropped, value=dash.controls['n'].value, "
          "points=len(dash.views['line'].widget.data[0].y)))")


@pytest.fixture
def kernel():
    jupyter_client = pytest.importorskip("jupyter_client")
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _execute(kc, code: str, timeout: float = 120.0) -> dict:
    """Run ``code``; return its stdout and the value of the ``REPORT`` expression."""
    reply = kc.execute_interactive(code, user_expressions={"report": REPORT} if "dash" in code else {},
                                   timeout=timeout, output_hook=lambda msg: None)
    assert reply["content"]["status"] == "ok", reply["content"]
    return reply["content"].get("user_expressions", {})


def _report(kc) -> dict:
    reply = kc.execute_interactive("pass", user_expressions={"report": REPORT}, timeout=120,
                                   output_hook=lambda msg: None)
    value = reply["content"]["user_expressions"]["report"]
    assert value["status"] == "ok", value
    return json.loads(ast.literal_eval(value["data"]["text/plain"]))


def _model_id(kc, setup: str) -> str:
    out: list[str] = []

    def hook(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])

    reply = kc.execute_interactive(setup, timeout=120, output_hook=hook)
    assert reply["content"]["status"] == "ok", reply["content"]
    lines = [l for l in "".join(out).splitlines() if l.startswith("{")]
    assert lines, f"no model id printed: {out!r}"
    return json.loads(lines[-1])["model_id"]


def _change(kc, model_id: str, value: int, kind: str = "slider") -> None:
    """What a browser sends when the reader releases the slider at ``value`` (a selection sends the index)."""
    state = {"value": value} if kind == "slider" else {"index": value - 1}
    msg = kc.session.msg("comm_msg", {"comm_id": model_id,
                                      "data": {"method": "update", "state": state, "buffer_paths": []}})
    kc.shell_channel.send(msg)


def _wait_idle(kc, timeout: float = 120.0) -> None:
    """Wait until the kernel has handled everything sent so far (a cell runs after every queued message)."""
    kc.execute_interactive("pass", timeout=timeout, output_hook=lambda msg: None)


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared: the run did not start"
        time.sleep(0.02)


@pytest.mark.parametrize("kind", ["slider", "selection"])
def test_ten_quick_changes_cost_one_run_and_the_last_value_wins(kernel, tmp_path, kind):
    km, kc = kernel
    model_id = _model_id(kc, SETUP.format(mark=str(tmp_path / "started"), checkpoints=True, kind=kind))
    start = time.monotonic()
    for value in range(11, 21):  # ten releases within a few milliseconds
        _change(kc, model_id, value, kind)
    _wait_idle(kc)
    elapsed = time.monotonic() - start
    r = _report(kc)
    assert r["result"] == 20 and r["value"] == 20 and r["points"] == 21, r
    assert r["skipped"] + r["superseded"] == 9, r  # every change but the last was skipped or abandoned
    assert r["runs"] <= 3, r  # the first run, at most one abandoned run, the last value's run
    assert elapsed < 10 * 1.0, f"ten changes took {elapsed:.1f} s: they ran one after another"


def test_an_interrupt_ends_the_run_and_the_changes_waiting_behind_it(kernel, tmp_path):
    km, kc = kernel
    mark = tmp_path / "started"
    # an experiment with no checkpoint inside: the changes wait in the queue until the run ends
    model_id = _model_id(kc, SETUP.format(mark=str(mark), checkpoints=False, kind="slider"))
    _change(kc, model_id, 5)
    _wait_for(mark)
    for value in range(6, 11):
        _change(kc, model_id, value)
    _wait_for(mark.with_name("queued"))  # the kernel sees the five changes waiting behind its run
    km.interrupt_kernel()
    _wait_idle(kc)
    r = _report(kc)
    assert r["result"] == 1 and r["value"] == 1, r  # nothing after the interrupt ran; the controls went back
    assert r["dropped"] == 5 and r["runs"] == 2, r
    # the dashboard still works: the next change runs (now without the hold)
    _execute(kc, "HOLD = False")
    _change(kc, model_id, 7)
    _wait_idle(kc)
    r = _report(kc)
    assert r["result"] == 7 and r["runs"] == 3, r
