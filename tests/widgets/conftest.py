"""Shared fixtures for the widget tests: no test may leave a thread behind."""

from __future__ import annotations

import threading
import time

import pytest


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Fail a test that leaves a new thread running (the live poller must always be joined)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5.0
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        # only our own threads count: comm/zmq helpers of other libraries are not ours to judge
        extra = [t for t in extra if t.name.startswith("d2l-async")]
        if not extra or time.monotonic() > deadline:
            break
        extra[0].join(0.05)
    assert not extra, f"threads left running: {[t.name for t in extra]}"
