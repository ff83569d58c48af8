"""Fixtures for the figure tests."""

from __future__ import annotations

import pytest
from viz_traces import engine_like

from d2l_async.trace import Lane, LaneRole, Trace


@pytest.fixture
def small_trace() -> Trace:
    return engine_like(3)


@pytest.fixture
def empty_trace() -> Trace:
    return Trace.from_events([], lanes=[Lane("frontend", LaneRole.FRONTEND)])
