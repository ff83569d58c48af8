"""The public API of d2l_async.widgets: every exported name exists."""

from __future__ import annotations

import d2l_async.widgets as w



def test_ready_made_dashboards_are_exported():
    from d2l_async.widgets import dashboards

    for name in dashboards.__all__:
        assert name in w.__all__
        assert getattr(w, name) is getattr(dashboards, name)
