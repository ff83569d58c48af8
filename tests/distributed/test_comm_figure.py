"""plot_comm_overlap / comm_table: hidden under exposed per setting and rank, read through fig.data."""

from __future__ import annotations

import pandas as pd
import pytest

from d2l_async.viz import comm_table, plot_comm_overlap

ROWS = [{"setting": "after_backward", "rank": 0, "hidden_s": 0.0, "exposed_s": 0.004, "step_s": 0.030},
        {"setting": "bucketed", "rank": 0, "hidden_s": 0.003, "exposed_s": 0.001, "step_s": 0.025}]


def test_table_labels_each_setting_and_rank():
    df = comm_table(ROWS)
    assert df["label"].tolist() == ["after_backward · rank 0", "bucketed · rank 0"]
    assert comm_table(pd.DataFrame(ROWS)).equals(df)


def test_bars_stack_hidden_under_exposed_in_ms_with_steps_in_their_own_panel():
    fig = plot_comm_overlap(ROWS, title="t")
    hidden, exposed, step = fig.data
    assert fig.layout.barmode == "stack" and fig.layout.title.text == "t"
    assert list(hidden.y) == [0.0, 3.0] and list(exposed.y) == [4.0, 1.0]
    assert list(step.y) == [30.0, 25.0] and list(step.x) == ["after_backward", "bucketed"]
    # a panel of its own beside the bars, not a second y-axis overlaying them
    assert step.xaxis == "x2" and fig.layout.yaxis2.overlaying is None
    assert "ms" in fig.layout.yaxis.title.text


def test_no_rows_draws_an_empty_figure_that_says_so():
    fig = plot_comm_overlap([])
    assert not fig.data and "no communication" in fig.layout.annotations[0].text


@pytest.mark.parametrize("rows,error,match", [
    ("rows", TypeError, "expects records"),
    ([{"setting": "x", "rank": 0}], ValueError, "lack"),
    ([{"setting": "x", "rank": 0, "hidden_s": -1, "exposed_s": 0}], ValueError, "seconds >= 0"),
])
def test_bad_rows_get_clear_errors(rows, error, match):
    with pytest.raises(error, match=match):
        comm_table(rows)
