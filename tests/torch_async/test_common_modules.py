"""PyTorch's module database (``torch.testing._internal.common_modules.module_db``, what torch's
``test_modules.py`` iterates) as a peer suite: outputs, gradients and buffers bitwise eager's
(``module_runner.py``).

* ``make test``: :data:`FAST_MODULES`, first input, training mode, one variant each (rotating);
* ``HYPOTHESIS_PROFILE=slow``: every module, its first 3 inputs, training and eval, 1 and 2
  workers, built in the block and through ``make_async``.

A module that differs and is not listed in :data:`DIFFERENCES` fails the test.
"""

from __future__ import annotations

import pytest

from .helpers import slow
from .peer_suite import differing, run_chunk

pytest.importorskip("expecttest")  # torch.testing._internal needs it (dev extras)

#: module name -> (why it differs, what the user gets).  None differs on torch 2.13 (624 cases of 114
#: modules equal; FractionalMaxPool2d/3d's inputs are refused by eager torch itself in float32: their
#: ``_random_samples`` are not float32, so they are skipped).
DIFFERENCES: dict[str, tuple[str, str]] = {}

#: The layers the book and most models use, and a few that stress the runtime (lazy, RNNs, losses).
FAST_MODULES = ("nn.Linear", "nn.Bilinear", "nn.Conv1d", "nn.Conv2d", "nn.ConvTranspose2d", "nn.LazyConv2d",
                "nn.LazyLinear", "nn.BatchNorm1d", "nn.BatchNorm2d", "nn.LayerNorm", "nn.GroupNorm", "nn.RMSNorm",
                "nn.Embedding", "nn.EmbeddingBag", "nn.RNN", "nn.GRU", "nn.LSTM", "nn.MultiheadAttention",
                "nn.TransformerEncoderLayer", "nn.Transformer", "nn.Dropout", "nn.MaxPool2d", "nn.AvgPool2d",
                "nn.AdaptiveAvgPool2d", "nn.GELU", "nn.ReLU", "nn.Softmax", "nn.CrossEntropyLoss", "nn.MSELoss",
                "nn.CTCLoss", "nn.NLLLoss")
ALL_MODULES = 114  # len(module_db) in torch 2.13 (a later torch may have more: the last chunk runs to the end)


def _verdict(results: list[dict]) -> None:
    bad = differing(results, DIFFERENCES, "module")
    assert not bad, "modules that differ from eager:\n" + "\n".join(f"  {r['case']}: {r['detail']}" for r in bad)


def test_the_common_modules_of_torchs_database_equal_eager():
    results = run_chunk("module_runner", "0", "1000", "1", "fast:" + ",".join(FAST_MODULES))
    ran = {r["module"] for r in results if r["status"] == "equal"}
    assert len(ran) >= 0.9 * len(FAST_MODULES), f"only {sorted(ran)} ran"
    _verdict(results)


@slow
@pytest.mark.parametrize("start", range(0, ALL_MODULES, 29))
def test_every_module_of_torchs_database_equals_eager(start):
    stop = start + 29 if start + 29 < ALL_MODULES else 100_000
    results = run_chunk("module_runner", str(start), str(stop), "3")
    _verdict(results)
