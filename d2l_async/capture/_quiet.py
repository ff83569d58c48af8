"""Keep the profiler's own progress lines out of the reader's notebook.

When ``torch.profiler`` starts and stops, libkineto (its C++ backend) writes progress lines straight to
file descriptor 2, past Python's ``sys.stderr``::

    USDT:2026-12-01 00:13:27 9234:9234 SyncActivityProfilerHandler.cpp:52] profiler_start
    STAGE:2026-12-01 00:13:27 9234:9234 SyncActivityProfilerHandler.cpp:60] Completed Stage: Collection

In Jupyter they appear under the cell as red stderr (issue 10, notebook 09).  ``KINETO_LOG_LEVEL``
could hide them, but only by hiding kineto's warnings and errors with them (the ``USDT`` lines sit
above ``ERROR`` in its levels).  So :func:`quiet_kineto` catches fd 2 while the profiler starts or
stops, drops the lines in kineto's progress format (``USDT:`` / ``STAGE:`` prefixes, a C++ source
location) and writes every other line back to fd 2 unchanged: warnings and errors still reach the reader.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from typing import Iterator

__all__ = ["quiet_kineto", "is_kineto_progress"]

#: ``USDT:`` or ``STAGE:``, a date and time, ``pid:tid``, ``File.cpp:line]``: kineto's progress lines.
_PROGRESS = re.compile(r"^(USDT|STAGE):\S+ \S+ \d+:\d+ \S+\.(cpp|cc|h):\d+\] ")
_lock = threading.Lock()


def is_kineto_progress(line: str) -> bool:
    """True for one of kineto's start/stop progress lines (nothing else)."""
    return bool(_PROGRESS.match(line))


@contextlib.contextmanager
def quiet_kineto() -> Iterator[None]:
    """Drop kineto's progress lines written to fd 2 inside the block; pass every other line on."""
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
