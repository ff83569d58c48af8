"""What waits in the kernel's queue: control changes that arrived while a dashboard was running.

A Jupyter kernel handles one message at a time.  While a slider's run goes on, the front end's next
changes wait in the kernel's shell queue, each to rerun the experiment in full when its turn comes; an
interrupt (the ■ button) ends only the run in progress.  A dashboard that can see that queue can do what
a reader means: run the last value only (the changes before it are skipped, the run in flight is
abandoned at its next checkpoint), and after an interrupt run none of the changes that were waiting.

The queue is the kernel's own (ipykernel 6: ``kernel.msg_queue``, fed from ``kernel.shell_stream``);
:func:`pending_updates` *peeks* at it: it moves the messages the socket holds into that queue (what the
kernel's event loop would do next) and reads their headers without taking, reordering or dropping any.
jupyter_client's ``Session.deserialize(..., content=False)`` is its documented way to look without
consuming (the signature is not recorded, so the kernel accepts the message when its turn comes).
Where the kernel is another one (ipykernel 7, Colab's, a plain Python) the answer is ``None``: the
dashboard then runs every change, as before.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

__all__ = ["pending_updates", "current_message_id"]


def _kernel() -> Any:
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return getattr(shell, "kernel", None)


def _header_and_content(kernel: Any, frames: Any) -> tuple[dict, dict] | None:
    session = kernel.session
    try:
        _, parts = session.feed_identities(frames, copy=False)
        msg = session.deserialize(parts, content=False, copy=False)  # a peek: the signature is not recorded
        return msg["header"], session.unpack(bytes(getattr(msg["content"], "bytes", msg["content"])))
    except Exception:  # noqa: BLE001 - a message this reader cannot parse is simply not counted
        return None


def pending_updates(model_ids: Iterable[str]) -> list[str] | None:
    """The messages waiting in this kernel's queue that change a widget of ``model_ids``.

    Args:
        model_ids: the widgets' model (comm) ids.

    Returns:
        The waiting ``comm_msg`` "update" messages' ids, oldest first (``[]`` when none waits), or
        ``None`` when this process is no kernel whose queue can be read.
    """
    kernel = _kernel()
    queue = getattr(kernel, "msg_queue", None)
    stream = getattr(kernel, "shell_stream", None)
    items = getattr(queue, "_queue", None)
    if kernel is None or stream is None or items is None or not hasattr(kernel, "session"):
        return None
    ids = set(model_ids)
    try:
        import zmq

        stream.flush(zmq.POLLIN)  # what the event loop would do next: socket -> the kernel's queue, in order
        waiting = list(items)
    except Exception:  # noqa: BLE001 - another kernel's insides: cannot tell
        return None
    found: list[str] = []
    for item in waiting:
        args = item[2] if isinstance(item, tuple) and len(item) == 3 else ()
        if not args or not isinstance(args[0], (list, tuple)):
            continue
        parsed = _header_and_content(kernel, args[0])
        if parsed is None:
            continue
        header, content = parsed
        data = content.get("data") or {}
        if (header.get("msg_type") == "comm_msg" and content.get("comm_id") in ids
                and data.get("method") == "update" and (data.get("state") or {})):  # value, or a selection's index
            found.append(str(header.get("msg_id")))
    return found


def current_message_id() -> str | None:
    """The id of the message the kernel is handling now (a control change, a cell), or ``None``.

    Returns:
        The parent header's ``msg_id`` on the shell channel, or ``None`` outside a kernel.
    """
    kernel = _kernel()
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent("shell") if hasattr(kernel, "get_parent") else kernel._parent_header
    except Exception:  # noqa: BLE001
        return None
    return (parent or {}).get("header", {}).get("msg_id")
