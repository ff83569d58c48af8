"""Random programs give bitwise the same values on the engine as in eager torch.

Each program makes arrays on 1-3 virtual devices, applies binary, scalar, unary and in-place ops,
copies between devices and reads values in the middle, compares (``==``, ``<``, ... elementwise),
mixes in NumPy and complex scalars on either side, formats values (``f"{z}"``), and pushes custom
ops that push again from inside (re-entrant pushes); it runs once eagerly and once on an engine
(threaded with 1-4 workers per device, or naive).  Errors must match too: an op eager torch rejects
must be rejected at the same push, with the same exception type.

Profiles: ``HYPOTHESIS_PROFILE=ci`` (default, 2,000 programs) or ``slow`` (20,000).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from d2l_async.engine import NaiveEngine, ThreadedEngine

_PROFILES = {"ci": 2000, "slow": 20000}
_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
EXAMPLES = _PROFILES.get(_PROFILE, 2000)
WAIT = 20.0  # seconds any single wait may take before the test fails instead of hanging

SHAPES = [(3,), (2, 3), ()]
DTYPES = [torch.float32, torch.float64, torch.int64]
BINARY = ["add", "sub", "mul", "div", "matmul", "pow"]
INPLACE = ["add", "sub", "mul", "div"]
UNARY = ["neg", "sum", "mean", "exp", "relu"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
SCALARS = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0, 0.0]),
                    # NumPy scalars are scalars in torch, complex ones too
                    st.sampled_from([np.float64(2.0), np.float32(-0.5), np.int64(3), np.bool_(True), 1j]))

_FN = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
       "div": lambda a, b: a / b, "matmul": lambda a, b: a @ b, "pow": lambda a, b: a ** b}
_RFN = {"add": lambda a, s: s + a, "sub": lambda a, s: s - a, "mul": lambda a, s: s * a,
        "div": lambda a, s: s / a, "pow": lambda a, s: s ** a, "matmul": lambda a, s: s @ a}
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
_RCMP = {"eq": lambda a, s: s == a, "ne": lambda a, s: s != a, "lt": lambda a, s: s < a,
         "le": lambda a, s: s <= a, "gt": lambda a, s: s > a, "ge": lambda a, s: s >= a}


def _inplace(name, a, b):
    if name == "add":
        a += b
    elif name == "sub":
        a -= b
    elif name == "mul":
        a *= b
    else:
        a /= b
    return a


_UFN = {"neg": lambda a: -a, "sum": lambda a: a.sum(), "mean": lambda a: a.mean(),
        "exp": lambda a: a.exp(), "relu": lambda a: a.relu()}

step = st.one_of(
    st.tuples(st.just("new"), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2**16)),
    st.tuples(st.just("bin"), st.sampled_from(BINARY), st.integers(0, 99), st.integers(0, 99)),
    st.tuples(st.just("scalar"), st.sampled_from(BINARY), st.integers(0, 99), SCALARS, st.booleans()),
    st.tuples(st.just("cmp"), st.sampled_from(COMPARE), st.integers(0, 99), st.integers(0, 99)),
    st.tuples(st.just("cmpscalar"), st.sampled_from(COMPARE), st.integers(0, 99), SCALARS, st.booleans()),
    st.tuples(st.just("format"), st.integers(0, 99), st.sampled_from(["", ".2f"])),
    st.tuples(st.just("reentrant"), st.integers(0, 99)),
    st.tuples(st.just("inplace"), st.sampled_from(INPLACE), st.integers(0, 99), st.one_of(st.none(), SCALARS),
              st.integers(0, 99)),
    st.tuples(st.just("unary"), st.sampled_from(UNARY), st.integers(0, 99)),
    st.tuples(st.just("copy"), st.integers(0, 99), st.integers(0, 2)),
    st.tuples(st.just("read"), st.integers(0, 99)),
)
programs = st.lists(step, min_size=1, max_size=25)


def _initial(shape_i, dtype_i, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(-3, 4, SHAPES[shape_i], generator=g)
    return (t / 2).to(DTYPES[dtype_i]) if DTYPES[dtype_i].is_floating_point else t


def run(program, ndev, eng=None):
    """Interpret ``program`` eagerly (``eng=None``) or on ``eng``; return the observable log."""
    pool: list = []  # (value, device index)
    log: list = []

    def value(i):
        return pool[i % len(pool)]

    def read(v):
        if eng is None:
            return v.numpy().copy()
        v.wait_to_read(timeout=WAIT)
        return v.asnumpy()

    for k, s in enumerate(program):
        kind = s[0]
        if kind != "new" and not pool:
            continue
        try:
            if kind == "new":
                _, dev, shape_i, dtype_i, seed = s
                dev %= ndev
                t = _initial(shape_i, dtype_i, seed)
                pool.append((t if eng is None else eng.array(t, device=f"cpu:{dev}"), dev))
            elif kind == "bin":
                _, name, i, j = s
                a, dev = value(i)
                same = [v for v, d in pool if d == dev]
                b = same[j % len(same)]
                pool.append((_FN[name](a, b), dev))
            elif kind == "scalar":
                _, name, i, c, reflected = s
                a, dev = value(i)
                pool.append(((_RFN[name](a, c) if reflected else _FN[name](a, c)), dev))
            elif kind == "inplace":
                _, name, i, c, j = s
                a, dev = value(i)
                if c is None:
                    same = [v for v, d in pool if d == dev]
                    c = same[j % len(same)]
                _inplace(name, a, c)
            elif kind == "unary":
                _, name, i = s
                a, dev = value(i)
                pool.append((_UFN[name](a), dev))
            elif kind == "copy":
                _, i, dev = s
                a, _ = value(i)
                dev %= ndev
                pool.append((a.clone() if eng is None else a.to(f"cpu:{dev}"), dev))
            elif kind == "cmp":
                _, name, i, j = s
                a, dev = value(i)
                same = [v for v, d in pool if d == dev]
                pool.append((_CMP[name](a, same[j % len(same)]), dev))
            elif kind == "cmpscalar":
                _, name, i, c, reflected = s
                a, dev = value(i)
                pool.append(((_RCMP[name](a, c) if reflected else _CMP[name](a, c)), dev))
            elif kind == "format":
                _, i, spec = s
                log.append((k, "format", format(value(i)[0], spec)))
            elif kind == "reentrant":  # a custom op that pushes a second op on the array it writes
                a, dev = value(s[1])
                if a.dtype == torch.bool:
                    continue
                if eng is None:
                    a.add_(1)
                    a.mul_(2)
                else:
                    def outer(t, a=a):
                        eng.push(lambda t: t.mul_(2), writes=(a,))  # runs after outer returns
                        t.add_(1)

                    eng.push(outer, writes=(a,))
                    # the inner push is ordered at its own push time, after frontend pushes made while
                    # outer waited: read here (outer, then the op it pushed) so later steps are ordered
                    a.wait_to_read(timeout=WAIT)
                log.append((k, "read", _bytes(read(a))))
            elif kind == "read":
                log.append((k, "read", _bytes(read(value(s[1])[0]))))
        except Exception as exc:  # noqa: BLE001 - the error itself is what we compare
            log.append((k, "error", type(exc)))
    log.append(("end", [_bytes(read(v)) for v, _ in pool]))
    return log


def _bytes(a: np.ndarray):
    return (str(a.dtype), a.shape, a.tobytes())


@pytest.fixture
def engines():
    """Engines shared by all examples of one test (creating 2,000 would test thread start-up)."""
    made: dict = {}

    def get(kind, workers, ndev, record):
        key = (kind, workers, ndev, record)
        if key not in made:
            devices = tuple(f"cpu:{i}" for i in range(ndev))
            made[key] = (NaiveEngine(devices=devices, record=record) if kind == "naive" else
                         ThreadedEngine(workers=workers, devices=devices, record=record))
        return made[key]

    yield get
    for eng in made.values():
        eng.shutdown(wait=False, timeout=5)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(program=programs, ndev=st.integers(1, 3), workers=st.integers(1, 4),
       kind=st.sampled_from(["threaded", "threaded", "threaded", "naive"]), record=st.booleans())
def test_engine_matches_eager_torch(engines, program, ndev, workers, kind, record):
    eng = engines(kind, workers, ndev, record)
    expected = run(program, ndev)
    got = run(program, ndev, eng)
    eng.waitall(timeout=WAIT)  # no error may be left over: every error was raised at its push
    assert got == expected
