"""Fixtures for the whole suite.

Every test, whatever it exercises, must leave no thread of ours behind: engine workers are named
``"d2l_async ..."`` and the widgets' live pollers ``"d2l-async ..."``.  Threads of other libraries
(zmq, comm, the profiler) are not ours to judge.
"""

from __future__ import annotations

import threading
import time

import pytest

OUR_THREADS = ("d2l_async ", "d2l-async")


def our_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(OUR_THREADS) and t.is_alive()}


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Fail a test that leaves one of our threads running (they get 5 s to exit)."""
    before = our_threads()
    yield
    deadline = time.monotonic() + 5.0
    leaked = our_threads() - before
    while leaked and time.monotonic() < deadline:
        time.sleep(0.01)
        leaked = {t for t in leaked if t.is_alive()}
    assert not leaked, f"threads still running after the test: {sorted(t.name for t in leaked)}"
