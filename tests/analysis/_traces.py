"""Small hand-built traces whose analysis can be worked out on paper."""

from __future__ import annotations

from d2l_async.trace import Event, Lane, LaneRole, Trace

FRONT = Lane("frontend", LaneRole.FRONTEND)
S1 = Lane("cuda:0 stream 1", LaneRole.BACKEND, device="cuda:0", stream=1)
S2 = Lane("cuda:0 stream 2", LaneRole.BACKEND, device="cuda:0", stream=2)


def three_launches() -> Trace:
    """Launches at 0, 1, 2; kernels run [3,5], [5,6], [6,10] on stream 1.

    queue (issue -> start): 1 at 0, 2 at 1, 3 at 2, 2 at 3, 1 at 5, 0 at 6.
    """
    ev = [
        Event("frontend", "launch", "cudaLaunchKernel", 0.0, 0.5, flow=1),
        Event("frontend", "launch", "cudaLaunchKernel", 1.0, 1.5, flow=2),
        Event("frontend", "launch", "cudaLaunchKernel", 2.0, 2.5, flow=3),
        Event("cuda:0 stream 1", "kernel", "k1", 3.0, 5.0, issue=0.0, flow=1, device="cuda:0"),
        Event("cuda:0 stream 1", "kernel", "k2", 5.0, 6.0, issue=1.0, flow=2, device="cuda:0"),
        Event("cuda:0 stream 1", "kernel", "k3", 6.0, 10.0, issue=2.0, flow=3, device="cuda:0"),
        Event("frontend", "block", "cudaDeviceSynchronize", 2.5, 10.0, reason="cudaDeviceSynchronize"),
    ]
    return Trace.from_events(ev, [FRONT, S1, S2])
