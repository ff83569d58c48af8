"""The copy a browser test runs: the dashboard's cell and the cells it needs, not the experiments before it."""

from __future__ import annotations

import json

from . import _lab


def _cell(source: str, kind: str = "code") -> dict:
    return {"cell_type": kind, "metadata": {}, "source": source,
            **({"outputs": [{"output_type": "stream", "name": "stdout", "text": "x"}], "execution_count": 3}
               if kind == "code" else {})}


def test_the_copy_keeps_what_the_dashboard_reads_and_drops_the_experiments(tmp_path):
    cells = [
        _cell("import sys\nif 'google.colab' in sys.modules:\n    %pip install d2l-async"),  # 0: binds sys only
        _cell("from d2l_async import experiments as ex, viz\nfrom d2l_async.widgets import Dashboard"),  # 1
        _cell("An experiment.", "markdown"),                                                   # 2
        _cell("r = ex.run_sync_async(ops=100)\nviz.plot_sync_async(r)"),                       # 3: an experiment
        _cell("def draw(r):\n    return viz.plot_sync_async(r)"),                             # 4: read below
        _cell("size = 10"),                                                                     # 5: rebound below
        _cell("size = 20\nrun = ex.run_sync_async"),                                            # 6
        _cell("dash = Dashboard(run, {'n': size}, {'figure': draw})"),                          # 7: the dashboard
        _cell("after = 1"),                                                                     # 8
    ]
    assert _lab.needed_cells(cells, 7) == [1, 4, 6, 7]
    src, dst = tmp_path / "nb.ipynb", tmp_path / "copy.ipynb"
    src.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    last = _lab.notebook_up_to_dashboard(src, dst)
    copy = json.loads(dst.read_text())["cells"]
    assert [c["source"] for c in copy] == [cells[i]["source"] for i in (1, 2, 4, 6, 7)]
    assert last == len(copy) - 1 and all(c["outputs"] == [] for c in copy if c["cell_type"] == "code")
