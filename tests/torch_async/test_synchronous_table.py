"""The plain-PyTorch page's table (docs/plain-pytorch.md) of what runs synchronously, at once, or is refused inside a block, is the
code's: every row's case is triggered here and recorded with the reason the table shows, and every
blocking reason the runtime records for these programs has a row.

The table lives under "What waits, what runs at once, what is refused" in docs/plain-pytorch.md; its second
column holds, in backticks, the reason a trace records (``OP`` and ``FN`` stand for any op or
function name), or ``refused``/``at once`` for the rows a trace has no block for.
"""

from __future__ import annotations

import copy
import io
import itertools
import os
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from d2l_async.torch_async import UnsupportedTorchError, asynchronous, synchronize

from .helpers import blocks, hold_until_blocked

PAGE = Path(__file__).resolve().parents[2] / "docs" / "plain-pytorch.md"
HEADING = "## What waits, what runs at once, what is refused"


def _rows() -> list[tuple[str, list[str]]]:
    """(case, [recorded-as patterns]) of every row of the page's table."""
    text = PAGE.read_text()
    assert HEADING in text, f"docs/plain-pytorch.md lacks its section {HEADING!r}"
    lines = text.split(HEADING, 1)[1].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = [line for line in itertools.takewhile(lambda line: line.startswith("|"), lines[first:])]
    rows = []
    for line in table:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or set(cells[0]) <= set("-: ") or cells[0] == "what":
            continue
        rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1])))
    return rows


def _pattern(recorded: str) -> re.Pattern:
    return re.compile(re.escape(recorded).replace("OP", r"[\w.]+").replace("FN", r"\w+") + "$")


OUTSIDE = nn.Linear(2, 2)  # made outside every block: its tensors are plain


def _reasons(program) -> list[str]:
    """The blocks a program records; the worker is held until the first one, so every blocking
    point finds its op still queued."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with asynchronous() as rt:
            hold_until_blocked(rt)
            program(rt)
            synchronize()
    return [r for r, _ in blocks(rt)]


def _escape(rt):
    x = torch.ones(3) + 0
    arr = x.numpy()
    x.add_(1)  # memory shared with the live array: at once
    del arr


def _plain_data(rt):
    OUTSIDE.weight.data = torch.zeros(2, 2) + 1


def _fork(rt):
    torch.ones(2) + 1  # queued: the fork waits for it (DataLoader's workers are forked this way)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


#: recorded-as pattern -> a program that must record it
TRIGGERS = {
    "item": lambda rt: (torch.ones(2) + 1).sum().item(),
    "equal": lambda rt: torch.equal(torch.ones(2) + 0, torch.ones(2)),
    "print": lambda rt: repr(torch.ones(2) + 1),
    "numpy": lambda rt: (torch.ones(2) + 1).numpy(),
    "dlpack": lambda rt: np.from_dlpack(torch.ones(2) + 1),
    "tolist": lambda rt: (torch.ones(2) + 1).tolist(),
    "pickle": lambda rt: pickle.dumps(torch.ones(2) + 1),
    "deepcopy": lambda rt: copy.deepcopy(torch.ones(2) + 1),
    "waitall": lambda rt: (torch.ones(2) + 1, synchronize()),
    "data-dependent shape: OP": lambda rt: torch.nonzero(torch.ones(3) + 1),
    "no output metadata: OP": lambda rt: (torch.ones(2, 2) + 0).to_sparse(),
    "meta kernel disagrees: OP": lambda rt: nn.functional.embedding_bag(torch.tensor([1, 2, 0]), torch.randn(3, 2),
                                                                        torch.tensor([0, 2])),
    "output sizes known only at run time: mkldnn_rnn_layer": lambda rt: nn.LSTM(2, 3)(torch.randn(4, 1, 2) + 0),
    "an output C++ reads from memory: _pack_padded_sequence": lambda rt: nn.utils.rnn.pack_padded_sequence(
        torch.randn(3, 2, 1) + 0, [3, 2]),
    "write to a plain tensor": lambda rt: OUTSIDE.bias.data.add_(1),
    "assign .data of a tensor made outside the block": _plain_data,
    "memory shared with a numpy array (.numpy())": _escape,
    "out= resizes its output: OP": lambda rt: torch.add(torch.ones(2) + 0, 1, out=torch.ones(3) + 0),
    "explicit generator: OP": lambda rt: torch.randn(2, generator=torch.Generator().manual_seed(0)),
    "RNG state (FN)": lambda rt: (torch.randn(2), torch.get_rng_state()),
    "torch.FN": lambda rt: (torch.ones(2) + 1, torch.set_default_dtype(torch.float32)),
    "set_": lambda rt: torch.load(io.BytesIO(_saved())),
    "a sparse_coo tensor": lambda rt: torch.ones(2, 2).to_sparse() * 2,  # made plain: its ops stay plain
    "a tensor of another asynchronous() block": None,  # needs two blocks: checked below
    "ctc_loss lengths": lambda rt: nn.CTCLoss()(torch.randn(5, 1, 3).log_softmax(2), torch.tensor([[1, 2]]),
                                                torch.tensor([5]) + 0, torch.tensor([2]) + 0),
    "fork (DataLoader workers)": _fork,
}


def _saved() -> bytes:
    buf = io.BytesIO()
    torch.save(torch.ones(2), buf)
    return buf.getvalue()


def _refused_compile():
    with asynchronous():
        with pytest.raises(UnsupportedTorchError):
            torch.compile(lambda x: x)


def _refused_tensor_split():
    with asynchronous():
        with pytest.raises(RuntimeError, match="not allocated"):
            torch.tensor_split(torch.arange(6.0), torch.tensor([2, 4]) + 0)


def _refused_export():
    with asynchronous():
        with pytest.raises(UnsupportedTorchError):
            torch.export.export(nn.Linear(2, 2), (torch.ones(1, 2),))


REFUSED = {"torch.compile": _refused_compile, "torch.export": _refused_export, "tensor_split": _refused_tensor_split}


def test_every_row_of_the_table_has_a_program_here_and_every_program_a_row():
    recorded = {r for _, rs in _rows() for r in rs if r not in ("refused", "at once")}
    assert recorded == set(TRIGGERS), (f"on the page, not here: {sorted(recorded - set(TRIGGERS))}; "
                                       f"here, not on the page: {sorted(set(TRIGGERS) - recorded)}")
    refused = {case for case, rs in _rows() if "refused" in rs}
    assert {k for k in REFUSED if any(k in case for case in refused)} == set(REFUSED), refused


@pytest.mark.parametrize("recorded", [pytest.param(k, marks=[pytest.mark.process] if v is _fork else [])
                                      for k, v in TRIGGERS.items() if v is not None])
def test_each_case_of_the_table_is_recorded_with_its_reason(recorded):
    reasons = _reasons(TRIGGERS[recorded])
    assert any(_pattern(recorded).match(r) for r in reasons), f"{recorded!r} not among {reasons}"
    rows = [_pattern(r) for _, rs in _rows() for r in rs if r not in ("refused", "at once")]
    unlisted = [r for r in reasons if not any(p.match(r) for p in rows)]
    assert not unlisted, f"recorded, but not in the page's table: {unlisted}"


def test_a_tensor_of_another_open_block_is_waited_for():
    with asynchronous() as outer:
        hold_until_blocked(outer)
        x = torch.ones(2) + 1
        with asynchronous() as inner:
            y = x * 2
            got = y.tolist()
    assert got == [4.0, 4.0]
    assert any(_pattern("a tensor of another asynchronous() block").match(r) for r, _ in blocks(inner) + blocks(outer))


@pytest.mark.parametrize("case", list(REFUSED))
def test_the_refused_cases_are_refused(case):
    REFUSED[case]()
