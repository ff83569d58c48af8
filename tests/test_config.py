from __future__ import annotations

import pytest

from d2l_async import config


@pytest.mark.parametrize("raw,expected", [("1", True), ("true", True), ("", False), ("0", False), ("off", False)])
def test_quick_mode_reads_the_environment(monkeypatch, raw, expected):
    monkeypatch.setenv("D2L_ASYNC_QUICK", raw)
    assert config.quick_mode() is expected
    assert config.scale(1000, 10) == (10 if expected else 1000)


def test_quick_mode_rejects_garbage(monkeypatch):
    monkeypatch.setenv("D2L_ASYNC_QUICK", "maybe")
    with pytest.raises(ValueError, match="D2L_ASYNC_QUICK"):
        config.quick_mode()


def test_scale_rejects_nonpositive():
    with pytest.raises(ValueError):
        config.scale(0, 1)


def test_engine_kind(monkeypatch):
    monkeypatch.setenv("D2L_ASYNC_ENGINE", "naive")
    assert config.engine_kind() == "naive"
    monkeypatch.setenv("D2L_ASYNC_ENGINE", "fast")
    with pytest.raises(ValueError, match="naive"):
        config.engine_kind()
