"""Fixtures for the experiment tests: quick mode (the thread-leak check is in tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    """Every experiment test runs the quick workloads."""
    monkeypatch.setenv("D2L_ASYNC_QUICK", "1")


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
