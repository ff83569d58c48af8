"""Control helpers: sliders report on release, ranges are checked, backends are honest."""

from __future__ import annotations

import pytest

from d2l_async.widgets import _controls as c


def test_sliders_do_not_update_continuously():
    for w in (c.int_slider("n", 5, 1, 10), c.float_slider("x", 0.5, 0, 1), c.log_slider("size", 256, 64, 4096)):
        assert w.continuous_update is False


def test_log_slider_offers_powers_and_returns_ints():
    w = c.log_slider("size", 256, 64, 1024)
    assert [v for _, v in w.options] == [64, 128, 256, 512, 1024]
    assert w.value == 256 and isinstance(w.value, int)
    with pytest.raises(ValueError, match="power of 2"):
        c.log_slider("size", 100, 64, 1024)


@pytest.mark.parametrize("args", [(11, 1, 10), (0, 1, 10), (5, 10, 1)])
def test_int_slider_checks_its_range(args):
    with pytest.raises(ValueError, match="n"):
        c.int_slider("n", *args)


def test_dropdown_checks_its_value():
    assert c.dropdown("d", ["a", "b"]).value == "a"
    assert c.dropdown("d", [("A", 1), ("B", 2)], 2).value == 2
    with pytest.raises(ValueError, match="not one of"):
        c.dropdown("d", ["a"], "z")
    with pytest.raises(ValueError, match="at least one"):
        c.dropdown("d", [])


def test_cuda_is_offered_only_with_a_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert c.backends() == ("engine",)
    assert [v for _, v in c.backend_dropdown().options] == ["engine"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert c.backends() == ("engine", "cuda")
    assert c.backends(min_gpus=2) == ("engine",)  # two-device experiments need two GPUs
    assert [v for _, v in c.backend_dropdown(min_gpus=2).options] == ["engine"]


def test_blocker_and_expression_dropdowns():
    assert c.blocker_dropdown().value == "print"
    from d2l_async.experiments import BLOCKERS, EXPRESSIONS

    assert list(c.blocker_dropdown().options) == list(BLOCKERS)
    assert c.expression_dropdown().value == "x * y + 2" == EXPRESSIONS[0]
    assert c.blocker_dropdown("item", ["print", "item"]).value == "item"
    assert c.toggle("on", True).value is True
