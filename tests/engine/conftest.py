"""Fixtures for the engine tests (the thread-leak check is in tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def engine():
    """A two-device threaded engine, shut down after the test."""
    from d2l_async.engine import ThreadedEngine

    eng = ThreadedEngine(workers=2, devices=("cpu:0", "cpu:1"))
    try:
        yield eng
    finally:
        eng.shutdown(wait=False, timeout=5)
