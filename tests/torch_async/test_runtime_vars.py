"""The torch runtime's variables: TVar sets every slot as the engine's EngineVar does (its
__init__ inlines EngineVar's and Var's for speed, so a slot added there must be set here too)."""

from __future__ import annotations

from d2l_async.engine._op import EngineVar
from d2l_async.torch_async._sync import RngVar, TVar


def _slots(cls: type) -> list[str]:
    return [s for c in cls.__mro__ for s in getattr(c, "__slots__", ())]


def test_tvar_sets_every_slot_as_enginevar_does():
    ref, v = EngineVar("t7"), TVar("t7")
    for name in _slots(EngineVar):
        assert getattr(v, name) == getattr(ref, name), name
    assert v.last is None and v.escaped is None
    assert set(_slots(TVar)) == set(_slots(EngineVar)) | {"last", "escaped"}


def test_rng_var_never_holds_an_error():
    v = RngVar("RNG")
    v.error = ValueError("x")
    assert v.error is None and v.readers == 0 and v.writer is None
