"""PyTorch's optimizer database (``torch.testing._internal.common_optimizers.optim_db``) as a peer
suite: every optimizer, input and CPU implementation, bitwise eager's (``optim_runner.py``).

* ``make test``: each optimizer's first input, one variant (workers and build rotating);
* ``HYPOTHESIS_PROFILE=slow``: every config (inputs x loop/foreach/fused, with a scheduler list),
  1 and 2 workers, built in the block and through ``make_async``.

A config that differs and is not listed in :data:`DIFFERENCES` fails the test.
"""

from __future__ import annotations

import pytest

from .helpers import slow
from .peer_suite import differing, run_chunk

pytest.importorskip("expecttest")  # torch.testing._internal needs it (dev extras)

#: optimizer config -> (why it differs, what the user gets).  None differs on torch 2.13.
DIFFERENCES: dict[str, tuple[str, str]] = {}


def _verdict(results: list[dict]) -> None:
    bad = differing(results, DIFFERENCES, "config")
    assert not bad, "optimizer configs that differ from eager:\n" + "\n".join(f"  {r['config']}: {r['detail']}"
                                                                               for r in bad)


def test_each_optimizer_of_torchs_database_equals_eager():
    results = run_chunk("optim_runner", "0", "100", "fast")
    checked = {r["optimizer"] for r in results if r["status"] == "equal"}
    assert len(checked) >= 12, f"only {sorted(checked)} ran"  # SGD, Adam, AdamW, ... really ran
    _verdict(results)


@slow
@pytest.mark.parametrize("start", range(0, 15, 5))
def test_every_optimizer_config_equals_eager(start):
    results = run_chunk("optim_runner", str(start), str(start + 5 if start < 10 else 100))
    assert sum(r["status"] == "equal" for r in results) >= 0.8 * len(results)
    _verdict(results)
