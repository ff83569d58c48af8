"""Random programs give bitwise the same values on the one-file engine as in eager torch.

The programs and their interpreter are ``tests/engine/test_property.py``'s, which holds the fast
engine to the same comparison: arrays on 1-3 devices, binary, scalar (NumPy and complex too,
either side), unary, in-place and comparison ops, copies between devices, reads and formatted values
in the middle, and custom ops that push again from inside; 1-4 workers per device.

One difference, by design: the fast engine infers each result's shape and dtype at push, so an op
eager torch rejects is rejected at the same line; the one-file engine does not infer (its docstring
says so), so such an op fails on a worker and its error reaches the next blocker, and every array
computed from it fails too.  So each program is first run eagerly and the steps eager torch rejects
are dropped (again, until it runs clean); the rest must match bitwise, and no error may be left
for ``waitall``.  Deferred errors have their own test (``test_minimal_lessons.py``).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from d2l_async.engine.minimal import Engine
from tests.engine.test_property import EXAMPLES, WAIT, programs, run


def without_eager_errors(program: list, ndev: int) -> tuple[list, list]:
    """``program`` less the steps eager torch rejects (repeated: dropping a step moves the indices
    later steps pick), and its eager log."""
    while True:
        log = run(program, ndev)
        bad = {e[0] for e in log if e[0] != "end" and e[1] == "error"}
        if not bad:
            return program, log
        program = [s for k, s in enumerate(program) if k not in bad]


@pytest.fixture
def engines():
    """Engines shared by all examples of one test (creating 2,000 would test thread start-up)."""
    made: dict = {}

    def get(workers, ndev):
        if (workers, ndev) not in made:
            made[workers, ndev] = Engine(devices=tuple(f"cpu:{i}" for i in range(ndev)), workers=workers)
        return made[workers, ndev]

    yield get
    for eng in made.values():
        eng.close(timeout=5)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(program=programs, ndev=st.integers(1, 3), workers=st.integers(1, 4))
def test_minimal_engine_matches_eager_torch(engines, program, ndev, workers):
    clean, expected = without_eager_errors(program, ndev)
    event("eager rejected a step: dropped" if len(clean) < len(program) else "eager ran every step")
    eng = engines(workers, ndev)
    got = run(clean, ndev, eng)
    eng.waitall(timeout=WAIT)  # no error may be left over
    assert got == expected


def test_dropping_the_rejected_steps_leaves_a_program_eager_runs_clean():
    # a matmul of shapes (3,) @ (2, 3) is rejected; dropping it moves the next step's index picks
    program = [("new", 0, 0, 0, 1), ("new", 0, 1, 0, 2), ("bin", "matmul", 0, 1), ("unary", "neg", 2),
               ("read", 2)]
    clean, log = without_eager_errors(program, 1)
    assert ("bin", "matmul", 0, 1) not in clean and len(clean) == 4
    assert not any(e[1] == "error" for e in log if e[0] != "end")
