"""Processes that end when the process that launched them ends, however it ends.

When a notebook kernel that called :func:`~d2l_async.distributed.launch` is killed -- SIGKILL from
Jupyter's "restart", the OOM killer -- no ``finally`` runs in it, and its ranks and multiprocessing's
fork server used to keep running.  Each of them now watches the launching process:

* :func:`watch` starts a daemon thread that waits for a process to end -- on a *pidfd* on Linux
  (``os.pidfd_open``: readable once the process has exited; no polling, no pid reuse), else by
  asking for the pid every 0.25 s -- and then ends this process at once (``os._exit``: nothing
  left to wait for).
* The fork server runs no code of ours, but it imports the modules it is told to preload; this
  module is one of them, and when it is imported *in the fork server* it watches the server's
  parent, the launching process.  (Not the parent-death signal: Linux sends that when the parent
  *thread* exits, and the thread that started the server may be a short-lived one.)

Standard library only.
"""

from __future__ import annotations

import os
import select
import sys
import threading
import time

__all__ = ["watch", "in_fork_server"]

#: Seconds between two looks at the pid where there is no pidfd (not Linux).
POLL_S = 0.25


def watch(pid: int, code: int = 1) -> bool:
    """End this process (``os._exit(code)``) as soon as process ``pid`` has ended.

    Returns False (and watches nothing) when ``pid`` is this process itself.  When ``pid`` is
    already gone, ends this process at once.
    """
    if pid == os.getpid():
        return False
    fd = None
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(code)
    except (AttributeError, OSError):  # no pidfd here: poll the pid
        fd = None

    def wait() -> None:
        if fd is not None:
            while True:
                ready, _, _ = select.select([fd], [], [])
                if ready:
                    break
        else:
            while True:
                time.sleep(POLL_S)
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    pass
        os._exit(code)

    threading.Thread(target=wait, name="d2l_async watchdog", daemon=True).start()
    return True


def in_fork_server() -> bool:
    """True while multiprocessing's fork server is importing its preload modules (this one)."""
    f = sys._getframe()
    while f is not None:
        code = f.f_code
        if code.co_name == "main" and code.co_filename.replace("\\", "/").endswith("multiprocessing/forkserver.py"):
            return True
        f = f.f_back
    return False


if in_fork_server():  # the fork server ends with the process that started it
    watch(os.getppid(), code=0)
