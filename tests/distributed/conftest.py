from __future__ import annotations

import pytest

from d2l_async.distributed import is_alive as alive


@pytest.fixture
def pids():
    """Collects the ranks' pids through launch(on_start=...); after the test none may be alive."""
    started: list[int] = []
    yield started
    left = [p for p in started if alive(p)]
    assert not left, f"rank processes still alive after the test: {left}"
