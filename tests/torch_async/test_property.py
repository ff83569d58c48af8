"""Random plain-torch programs give bitwise eager torch's results inside ``asynchronous()``.

Programs (``programs.py``) mix factories, broadcasting binary ops, matmul, reductions, views,
in-place writes (``x[0] = 3``, ``index_add_``, ``t_``, ``out=``), random ops and blocking reads,
starting from plain tensors made before the block.  Every value read in the middle, every error's
type and every final tensor (dtype, shape, bytes) must equal eager torch's, on 1 worker (program
order) and on 2 (the dependency rules alone keep it right).

Profiles: ``HYPOTHESIS_PROFILE=ci`` (default, 150 programs per worker count) or ``slow`` (2,000 per
worker count: 4,000 in all).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from d2l_async.torch_async import asynchronous

from .programs import initial, programs, run, same_behaviour

_PROFILES = {"ci": 150, "slow": 2000}
EXAMPLES = _PROFILES.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), 150)


def _check(program, workers: int) -> None:
    expected = run(program, initial(program[0]))
    try:
        with asynchronous(workers=workers, record=workers == 2) as rt:
            got = run(program, initial(program[0]), barrier=lambda: rt.synchronize(timeout=30))
            later = None
            if got[1] is not None:  # the run stopped at an error: others may still be unreported
                try:
                    rt.synchronize(timeout=30)
                except Exception as exc:  # noqa: BLE001
                    later = type(exc).__name__
    except Exception as exc:  # noqa: BLE001 - a deferred error raised again at the block's end
        pytest.fail(f"the block's end raised {exc!r} although the run had raised its errors")
    assert same_behaviour(expected, got, later), (expected, got, later)


@pytest.mark.parametrize("workers", [1, 2])
def test_random_programs_equal_eager(workers):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(programs)
    def check(program):
        _check(program, workers)

    check()


def test_a_known_program_is_compared_for_real():
    """The runner observes values: a program whose result differs must fail the comparison."""
    prog = ([(0, 0)], [("scalar", "add", 0, 1), ("inplace", "setitem", 1, 0, 0)], 3)
    a = run(prog, initial(prog[0]))
    b = run(([(0, 0)], [("scalar", "add", 0, 2), ("inplace", "setitem", 1, 0, 0)], 3), initial(prog[0]))
    assert len(a[0]) == 3 and a[1] is None
    assert not same_behaviour(a, b)
    err = run(([(1, 0)], [("bin", "matmul", 0, 0)], 3), initial([(1, 0)]))
    assert err[1] == (0, "RuntimeError")
    assert same_behaviour(err, ([], (1, "RuntimeError"))) and not same_behaviour(err, ([], (0, "TypeError")))
