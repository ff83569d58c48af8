"""A blocker in a notebook cell is named the way IPython's tracebacks name the cell: ``In[N]:line``."""

from __future__ import annotations

import pytest

from d2l_async.engine._source import format_source


@pytest.fixture
def shell():
    interactiveshell = pytest.importorskip("IPython.core.interactiveshell")
    sh = interactiveshell.InteractiveShell.instance()
    yield sh
    sh.run_cell("eng.shutdown(timeout=5)", store_history=False)
    interactiveshell.InteractiveShell.clear_instance()


def test_block_in_a_cell_is_named_by_its_execution_count(shell):
    setup = shell.run_cell(
        "import time, torch\nfrom d2l_async.engine import ThreadedEngine\neng = ThreadedEngine()", store_history=True
    )
    setup.raise_error()
    # the op sleeps, so .item() on line 3 really waits (an already-ready value records no wait)
    cell = shell.run_cell(
        "x = eng.array(torch.ones(1), name='x')\neng.push(lambda w: time.sleep(0.2), writes=(x,))\nx.item()\n",
        store_history=True,
    )
    cell.raise_error()
    trace = shell.user_ns["eng"].trace()
    sources = [s for s, k in zip(trace["source"], trace["kind"]) if k == "block"]
    assert sources, "the .item() wait was not recorded"
    assert sources[-1] == f"In[{cell.execution_count}]:3: x.item()"


def test_plain_files_keep_their_base_name(tmp_path):
    path = tmp_path / "script.py"
    path.write_text("a = 1\nprint(z)\n")
    assert format_source((str(path), 2)) == "script.py:2: print(z)"
    assert format_source(None) == ""
