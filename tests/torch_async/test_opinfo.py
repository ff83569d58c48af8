"""PyTorch's OpInfo database as a peer test suite: every op, bitwise eager's.

``opinfo_runner.py`` checks each OpInfo's first samples on CPU float32 -- forward, in-place
variant, gradients -- inside ``asynchronous()`` with 1 and 2 workers and inputs made outside and
inside the block, against eager torch, bitwise.  It runs in subprocess chunks, so a crash fails the
test with the name of the op that was running.

* ``make test``: a fast subset, the first :data:`FAST_OPS` OpInfos of ``op_db`` (``abs``,
  ``add``, ``addmm``, ... the common ones come first), 2 samples each;
* ``HYPOTHESIS_PROFILE=slow``: all of ``op_db`` (702 OpInfos in torch 2.13), 2 samples each.

Every op that differs is listed in :data:`DIFFERENCES`, with the reason and what a user sees; an
op that differs and is not listed fails the test.  (docs/plain-pytorch.md shows this table.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .helpers import slow

pytest.importorskip("expecttest")  # torch.testing._internal needs it (dev extras)

import torch  # noqa: E402

from d2l_async.torch_async import _compat  # noqa: E402

#: OpInfo name -> (why it differs, what the user gets).  The table of differences docs/plain-pytorch.md shows.
DIFFERENCES: dict[str, tuple[str, str]] = {
    "prod": ("torch picks prod's backward formula by isTensorSubclassLike(input); the wrapper is a "
             "subclass, so it takes the zero-safe branch, which rounds differently",
             "gradient within 1 ulp of eager's, not bitwise (forward bitwise)"),
    "linalg.eig": ("linalg_eig_backward skips its check for an ill-defined loss (phase-dependent "
                   "eigenvectors) when the input is a tensor subclass",
                   "a gradient where eager raises RuntimeError; well-defined losses are bitwise"),
    "tensor_split": ("tensor_split with a *tensor* of indices made in the block reads the indices' "
                     "memory in C++ before any op is dispatched; the wrapper has none",
                     "RuntimeError at the call (\"data is not allocated yet\"); indices made "
                     "outside the block or as a list work"),
    **{name: ("uninitialized memory: eager's values are arbitrary too", "shape, dtype equal; values arbitrary")
       for name in ("empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted")},
}

#: Differences only an older torch shows (the version matrix, benchmarks/results/torch_versions.json):
#: OpInfo name -> (the first torch that is bitwise, why, what the user gets).  Only a gradient may differ.
OLD_TORCH_DIFFERENCES: dict[str, tuple[tuple[int, int], str, str]] = {
    "cumprod": ((2, 13), "torch before 2.13 picks cumprod's backward formula by isTensorSubclassLike, as prod's "
                "(torch's own LoggingTensor gets the same gradient: 12 ulp from eager's on 2.3.1 and 2.9.1, "
                "bitwise on 2.14.1)",
                "on torch 2.3-2.9 a gradient within 1.6e-5 relative of eager's, not bitwise (forward bitwise)"),
}

FAST_OPS = 170  # the first 170 OpInfos: >= 150 common ops, about 30 s on the 2-core machine
CHUNK = 85
ALL_OPS = 702   # len(op_db) in torch 2.13 (a later torch may have more: the last chunk runs to the end)


def _run_chunk(start: int, stop: int, samples: int = 2) -> list[dict]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-m", "tests.torch_async.opinfo_runner", str(start), str(stop), str(samples)],
                         capture_output=True, text=True, timeout=900, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    results, running = [], None
    for line in out.stdout.splitlines():
        if line.startswith("start "):
            running = line.split(" ", 2)[2]
        elif line.startswith("{"):
            results.append(json.loads(line))
            running = None
    if out.returncode != 0 or running is not None:
        pytest.fail(f"the runner crashed (exit {out.returncode}) while checking op {running!r}:\n"
                    f"{out.stderr[-3000:]}")
    return results


def _old_torch_difference(r: dict) -> bool:
    entry = OLD_TORCH_DIFFERENCES.get(r["op"])
    return entry is not None and _compat._version(torch.__version__) < entry[0] \
        and r["detail"].endswith("gradients differ")


def _verdict(results: list[dict]) -> None:
    bad = [r for r in results if r["status"] == "differs" and r["op"] not in DIFFERENCES
           and r["op"].split(".")[0] not in DIFFERENCES and not _old_torch_difference(r)]
    assert not bad, "ops that differ from eager and are not in DIFFERENCES:\n" + "\n".join(
        f"  {r['op']}: {r['detail']}" for r in bad)


@pytest.mark.parametrize("start", range(0, FAST_OPS, CHUNK))
def test_opinfo_fast_subset_equals_eager(start):
    results = _run_chunk(start, min(start + CHUNK, FAST_OPS))
    checked = [r for r in results if r["status"] != "skipped"]
    assert len(checked) >= 0.85 * CHUNK  # the subset really ran (most OpInfos support float32)
    _verdict(results)


@slow
@pytest.mark.parametrize("start", range(FAST_OPS, ALL_OPS, 110))
def test_opinfo_all_ops_equal_eager(start):
    stop = start + 110 if start + 110 < ALL_OPS else 100_000
    _verdict(_run_chunk(start, stop))


def test_the_table_lists_real_opinfo_names():
    from torch.testing._internal.common_methods_invocations import op_db
    names = {op.name for op in op_db}
    assert set(DIFFERENCES) <= names and set(OLD_TORCH_DIFFERENCES) <= names
    assert all(reason and behaviour for reason, behaviour in DIFFERENCES.values())


def test_an_old_torch_difference_is_excused_only_on_old_torch_and_only_for_gradients(monkeypatch):
    grads = {"op": "cumprod", "status": "differs", "detail": "sample 0, forward, 1 worker(s), inputs made outside: "
                                                             "gradients differ"}
    forward = {**grads, "detail": "sample 0, forward, 1 worker(s), inputs made outside: forward differs (1 vs 2)"}
    monkeypatch.setattr(torch, "__version__", "2.9.1")
    assert _old_torch_difference(grads) and not _old_torch_difference(forward)
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    assert not _old_torch_difference(grads)
    with pytest.raises(AssertionError, match="cumprod"):
        _verdict([grads])
