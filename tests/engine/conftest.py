"""Fixtures for the engine tests: no test may leave a worker thread behind."""

from __future__ import annotations

import threading
import time

import pytest


def _engine_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("d2l_async ")}


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Compare the engine's worker threads before and after each test (allowing 2 s to exit)."""
    before = _engine_threads()
    yield
    deadline = time.monotonic() + 2.0
    leaked = _engine_threads() - before
    while leaked and time.monotonic() < deadline:
        time.sleep(0.01)
        leaked = {t for t in leaked if t.is_alive()}
    assert not leaked, f"engine threads still running after the test: {sorted(t.name for t in leaked)}"


@pytest.fixture
def engine():
    """A two-device threaded engine, shut down after the test."""
    from d2l_async.engine import ThreadedEngine

    eng = ThreadedEngine(workers=2, devices=("cpu:0", "cpu:1"))
    try:
        yield eng
    finally:
        eng.shutdown(wait=False, timeout=5)
