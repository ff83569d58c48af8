from __future__ import annotations

import d2l_async.viz as viz


def test_all_is_honest():
    assert len(set(viz.__all__)) == len(viz.__all__)
    for name in viz.__all__:
        assert getattr(viz, name) is not None, name
    public = {n for n in dir(viz) if not n.startswith("_")} - {"annotations"}
    assert public == set(viz.__all__), public ^ set(viz.__all__)
