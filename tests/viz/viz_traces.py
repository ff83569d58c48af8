"""Synthetic traces shaped like the engine's recordings, with known times (shared by tests/viz)."""

from __future__ import annotations

from d2l_async.trace import Event, Lane, LaneRole, Trace

US = 1e-6


def engine_like(n_ops: int = 3, workers: int = 1, *, block: bool = True, nbytes: int = 8) -> Trace:
    """Frontend pushes ``n_ops`` ops 2 µs apart; each runs 5 µs on worker ``i % workers``; a print blocks."""
    lanes = [Lane("frontend", LaneRole.FRONTEND)] + [
        Lane(f"cpu:0 worker {w}", LaneRole.BACKEND, device="cpu:0", virtual=True, stream=w) for w in range(workers)]
    ev, free = [], [0.0] * workers
    t = 0.0
    for i in range(n_ops):
        push = t
        t += 2 * US
        ev.append(Event("frontend", "launch", "push", push, t, source=f"cell 1, line {i + 1}: a{i} = a + 1"))
        w = i % workers
        start = max(free[w], t + 1 * US)
        free[w] = start + 5 * US
        ev.append(Event(f"cpu:0 worker {w}", "op", f"op{i}", start, free[w], issue=push, device="cpu:0",
                        reads=("a",), writes=(f"a{i}",), nbytes=nbytes))
    if block:
        ev.append(Event("frontend", "block", "wait_to_read", t, max(free), reason="print",
                        source="cell 1, line 12: print(z)"))
    return Trace.from_events(ev, lanes=lanes, meta={"source": "engine", "virtual": True})


