"""Colab's path, kernel side: plotly 5.24 + ipywidgets 7.7 in ``output`` mode, read from what the kernel sends.

Colab's front end cannot run here, and JupyterLab 4 does not draw an ipywidgets 7 kernel's widgets.  So this
test runs a kernel with Colab's versions (:mod:`tests._matrix`, entry ``colab``), builds notebook 05's
dashboard there and reads the messages a front end would get: each figure arrives as a ``display_data``
with the plotly figure (``application/vnd.plotly.v1+json``), which a front end puts in the dashboard's
``Output`` widget.  Every figure must carry traces with points, and moving the first slider (a ``comm_msg``
as a browser sends it) must send new figures with different data.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from tests import _matrix

pytestmark = [pytest.mark.process, pytest.mark.matrix, pytest.mark.timeout(300)]

PLOTLY = "application/vnd.plotly.v1+json"


def _points(trace: dict) -> int:
    """A plotly-JSON trace's points: its longest array (plotly 5 sends lists; a typed array is a dict with shape)."""
    def size(value) -> int:
        if isinstance(value, dict):
            return int(value.get("shape", [len(value.get("bdata", ""))])[0])
        return len(value) if isinstance(value, list) else 1

    return max((size(trace[k]) for k in ("x", "y", "z", "values", "base") if trace.get(k) is not None), default=0)


def _run(kc, code: str) -> list[dict]:
    """Execute ``code``; return every iopub message it caused (display_data, clear_output, stream, ...)."""
    seen: list[dict] = []
    reply = kc.execute_interactive(code, timeout=240, output_hook=seen.append)
    assert reply["content"]["status"] == "ok", reply["content"]
    return seen


def _figures(messages: list[dict]) -> list[dict]:
    return [m["content"]["data"][PLOTLY] for m in messages
            if m["msg_type"] == "display_data" and PLOTLY in m["content"]["data"]]


def test_the_colab_path_sends_figures_with_data_and_new_ones_after_a_slider(tmp_path):
    jupyter_client = pytest.importorskip("jupyter_client")
    site, env = _matrix.install("colab")
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel(env={**os.environ, **env, "D2L_ASYNC_QUICK": "1"}, cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        versions = _run(kc, "import plotly, ipywidgets; print(plotly.__version__, ipywidgets.__version__)")
        assert "5.24.1 7.7.1" in "".join(m["content"].get("text", "") for m in versions)
        built = _run(kc, "import json\nfrom d2l_async.widgets import sync_async_dashboard\n"
                         "dash = sync_async_dashboard()\nprint('mode', dash.mode)")
        assert "mode output" in "".join(m["content"].get("text", "") for m in built)
        first = _figures(built)
        assert len(first) == 2, f"{len(first)} figures sent"  # the timings and the timeline
        assert all(sum(_points(t) for t in f["data"]) > 0 for f in first), "a figure was sent without points"

        slider = json.loads(_run_text(kc, "print(json.dumps({'slider': dash.controls['ops'].model_id, "
                                          "'index': dash.controls['ops'].index}))"))
        seen: list[dict] = []
        # a selection slider's front end sends the chosen option's index (ops: 10, 100, 1,000, 10,000)
        msg = kc.session.msg("comm_msg", {"comm_id": slider["slider"], "data": {
            "method": "update", "state": {"index": slider["index"] + 1}, "buffer_paths": []}})
        kc.shell_channel.send(msg)
        deadline = time.monotonic() + 240
        while len(_figures(seen)) < 2 and time.monotonic() < deadline:
            try:
                seen.append(kc.get_iopub_msg(timeout=5))
            except Exception:  # noqa: BLE001 - queue.Empty: keep waiting until the deadline
                pass
        again = _figures(seen)
        assert len(again) == 2, f"after the slider: {len(again)} figures sent"
        assert any(m["msg_type"] == "clear_output" for m in seen), "the old figures were not cleared (output grows)"
        assert all(sum(_points(t) for t in f["data"]) > 0 for f in again)
        assert json.dumps(again, sort_keys=True) != json.dumps(first, sort_keys=True), "no figure changed"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _run_text(kc, code: str) -> str:
    out = _run(kc, code)
    return "".join(m["content"].get("text", "") for m in out if m["msg_type"] == "stream").strip().splitlines()[-1]
