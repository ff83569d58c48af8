"""Fixtures for the whole suite.

One headless Chromium serves every browser test of the run (Playwright's sync API allows one
driver per thread, so two test folders cannot each start their own).

Every test, whatever it exercises, must leave no thread of ours behind: engine workers are named
``"d2l_async ..."`` and the widgets' live pollers ``"d2l-async ..."``.  Threads of other libraries
(zmq, comm, the profiler) are not ours to judge.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

OUR_THREADS = ("d2l_async ", "d2l-async")

#: ``make test-fast`` sets this: the suite without notebooks, browser, site, hub, ranks or any
#: process it would start (see :func:`fast_tier_starts_no_process`)
FAST = os.environ.get("D2L_ASYNC_TIER", "") == "fast"
#: folders whose every test executes notebooks or starts processes: not collected in the fast tier
HEAVY_FOLDERS = ("browser", "site", "hub", "one_core", "distributed")


def pytest_ignore_collect(collection_path, config):
    if FAST and collection_path.is_dir() and collection_path.name in HEAVY_FOLDERS \
            and collection_path.parent == Path(__file__).parent:
        return True
    return None


def pytest_collection_modifyitems(config, items):
    if FAST:
        slow = pytest.mark.skip(reason="slow: not in the fast tier (make test runs it)")
        # a browser is a process: refused at its start (below) inside a library's own thread, it would
        # leave that library's other threads waiting and the run would never exit
        process = pytest.mark.skip(reason="starts a process: not in the fast tier (make test runs it)")
        for item in items:
            if item.get_closest_marker("slow"):
                item.add_marker(slow)
            elif item.get_closest_marker("browser") or item.get_closest_marker("process"):
                item.add_marker(process)


@pytest.fixture(autouse=True)
def fast_tier_starts_no_process(monkeypatch):
    """In the fast tier a test that starts a process (a subprocess, a fork, a multiprocessing child)
    is skipped at that call: what it checks runs in ``make test``."""
    if not FAST:
        yield
        return
    import multiprocessing.process
    import subprocess

    def refuse(*args, **kwargs):
        pytest.skip("starts a process: not in the fast tier (make test runs it)")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    if hasattr(os, "posix_spawn"):
        monkeypatch.setattr(os, "posix_spawn", refuse)
    yield


def our_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(OUR_THREADS) and t.is_alive()}


@pytest.fixture(autouse=True, scope="session")
def python_handles_ctrl_c():
    """Python's own SIGINT handler for the run, as in a terminal or a notebook kernel.

    A shell without job control starts a background command (``make test &``, ``nohup ... &``) with
    SIGINT ignored, and Python then installs no handler: ``_thread.interrupt_main()`` does nothing and
    every Ctrl-C test fails with "DID NOT RAISE" after its 10 s gate.  What the tests check is what a
    reader pressing Ctrl-C gets, so they run with the handler the reader has."""
    before = signal.getsignal(signal.SIGINT)
    if before in (signal.SIG_IGN, signal.SIG_DFL):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if before in (signal.SIG_IGN, signal.SIG_DFL):
        signal.signal(signal.SIGINT, before)


@pytest.fixture
def no_foreign_gc_callbacks():
    """Set other libraries' ``gc.callbacks`` aside for a Ctrl-C test.

    hypothesis registers one (its junkdrawer times collections) once a property test has run. A
    collection can start anywhere; when the Ctrl-C handler runs inside that callback, CPython prints
    "Exception ignored in: gc_callback" and the KeyboardInterrupt is gone -- the version matrix lost
    one in 5 of 13 runs of the engine's Ctrl-C tests after tests/torch_async.  That is CPython's rule
    for any code a collection runs, not the engine's; these tests check the engine's code."""
    import gc

    callbacks, gc.callbacks[:] = gc.callbacks[:], []
    try:
        yield
    finally:
        gc.callbacks[:] = callbacks + [c for c in gc.callbacks if c not in callbacks]


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


CHROMIUM = os.environ.get("D2L_ASYNC_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def skip_or_fail(reason: str) -> None:
    """Skip a browser test here; under CI (``CI=true``) a missing browser is a failure."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser test cannot run under CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """Debian's headless Chromium driven by Playwright, with a fresh profile (a BrowserContext)."""
    if not os.path.exists(CHROMIUM):
        skip_or_fail(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed (pip install -e .[dev])")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1000},
        )
        yield context
        context.close()
