"""Fixtures for the experiment tests: quick mode, and no engine thread left behind."""

from __future__ import annotations

import threading
import time

import pytest


def _engine_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("d2l_async ")}


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    """Every experiment test runs the quick workloads."""
    monkeypatch.setenv("D2L_ASYNC_QUICK", "1")


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """An experiment must shut its engines down (allowing 2 s for the workers to exit)."""
    before = _engine_threads()
    yield
    deadline = time.monotonic() + 2.0
    leaked = _engine_threads() - before
    while leaked and time.monotonic() < deadline:
        time.sleep(0.01)
        leaked = {t for t in leaked if t.is_alive()}
    assert not leaked, f"engine threads still running after the test: {sorted(t.name for t in leaked)}"


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
