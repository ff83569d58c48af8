"""Keep the profiler's own progress lines and its start-up warning out of the reader's notebook.

When ``torch.profiler`` starts and stops, libkineto (its C++ backend) writes progress lines straight to
file descriptor 2, past Python's ``sys.stderr``::

    USDT:2026-12-01 00:13:27 9234:9234 SyncActivityProfilerHandler.cpp:52] profiler_start
    STAGE:2026-12-01 00:13:27 9234:9234 SyncActivityProfilerHandler.cpp:60] Completed Stage: Collection

In Jupyter they appear under the cell as red stderr (notebook 09).  ``KINETO_LOG_LEVEL``
could hide them, but only by hiding kineto's warnings and errors with them (the ``USDT`` lines sit
above ``ERROR`` in its levels).  So :func:`quiet_kineto` catches fd 2 while the profiler starts or
stops, drops the lines in kineto's progress format (``USDT:`` / ``STAGE:`` prefixes, a C++ source
location) and writes every other line back to fd 2 unchanged: warnings and errors still reach the reader.

torch 2.11's profiler also warns, once per process, when it starts::

    UserWarning: Warning: Profiler clears events at the end of each cycle.Only events from the current
    cycle will be reported.To keep events across cycles, set acc_events=True.

It is about ``schedule=`` cycles, which a capture never uses (one ``with`` block is one cycle), and torch
2.12 stops giving it without a schedule (pytorch/pytorch#180387).  :func:`quiet_kineto` ignores that one
warning, by its text, while the profiler starts or stops; every other warning passes.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
import warnings
from typing import Iterator

__all__ = ["quiet_kineto", "is_kineto_progress", "CYCLE_WARNING"]

#: ``USDT:`` or ``STAGE:``, a date and time, ``pid:tid``, ``File.cpp:line]``: kineto's progress lines.
_PROGRESS = re.compile(r"^(USDT|STAGE):\S+ \S+ \d+:\d+ \S+\.(cpp|cc|h):\d+\] ")
_lock = threading.Lock()
#: the start of torch 2.11's "clears events at the end of each cycle" warning (a regular expression)
CYCLE_WARNING = r"Warning: Profiler clears events at the end of each cycle"


def is_kineto_progress(line: str) -> bool:
    """True for one of kineto's start/stop progress lines (nothing else)."""
    return bool(_PROGRESS.match(line))


@contextlib.contextmanager
def quiet_kineto() -> Iterator[None]:
    """Drop kineto's progress lines written to fd 2 inside the block, and the profiler's cycle warning
    (:data:`CYCLE_WARNING`); pass every other line and warning on.

    Yields:
        ``None``: the block runs with those lines and that warning filtered; fd 2 and the warning filters are
        restored on exit.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=CYCLE_WARNING, category=UserWarning)
        with _quiet_fd2():
            yield


@contextlib.contextmanager
def _quiet_fd2() -> Iterator[None]:
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no fd 2 to catch (an embedded interpreter)
        yield
        return
    with _lock, tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [line for line in tmp.read().decode(errors="replace").splitlines(keepends=True)
                    if not is_kineto_progress(line)]
            if kept:
                os.write(2, "".join(kept).encode())
