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


def test_a_numbered_tvar_is_labelled_when_read_and_recorded_by_its_number():
    """``TVar(7)`` (the runtime's hot path) makes no string; its label reads "t7", and a recorder
    keeps the number, decoded with the runtime's prefix."""
    ref, v = EngineVar("t7"), TVar(7)
    for name in _slots(EngineVar):
        if name != "num":
            assert getattr(v, name) == getattr(ref, name), name
    assert v.num == 7 and v.label == "t7"
    v.label = "renamed"  # a name of its own, as EngineVar's label can be set
    assert v.label == "renamed" and v.num == -1


def test_a_runtime_trace_names_its_variables_t_n():
    import torch
    from d2l_async.torch_async import asynchronous

    with asynchronous() as rt:
        x = torch.ones(3)
        y = x + 1
        y.add_(1)
    df = rt.trace().to_frame()
    ops = df[df["kind"] != "block"]
    labels = [lab for col in ("reads", "writes") for row in ops[col] for lab in row]
    assert labels and all(lab.startswith("t") and lab[1:].isdigit() for lab in labels), labels
    assert f"t{x._var.num}" in labels and x._var.label in labels


def test_rng_var_never_holds_an_error():
    v = RngVar("RNG")
    v.error = ValueError("x")
    assert v.error is None and v.readers == 0 and v.writer is None
