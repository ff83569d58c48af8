from __future__ import annotations

from pathlib import Path

import pytest


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.fixture
def pids():
    """Collects the ranks' pids through launch(on_start=...); after the test none may be alive."""
    started: list[int] = []
    yield started
    left = [p for p in started if alive(p)]
    assert not left, f"rank processes still alive after the test: {left}"
