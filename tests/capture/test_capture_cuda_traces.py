"""The CUDA side of ``d2l_async.capture`` on synthetic Kineto traces, without a GPU.

``Capture(device="cuda:N")`` runs here against a stand-in for torch's CUDA and profiler: the stand-in
profiler writes a synthetic Kineto file of a CUDA run (tests/_cuda_traces.py), so the capture's own
steps -- the synchronizes around the body, reading the file, the facts it adds -- run for real.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from d2l_async.analysis import blocked_time, queue_length_summary  # noqa: E402
from d2l_async.capture import (BLOCKING_COPY_REASON, CAPTURE_SYNC_SOURCE, Capture, blocking_copies,  # noqa: E402
                               label_block_sources, synchronize_all)
from d2l_async.trace import LAUNCH_CALLS, Kind  # noqa: E402

from .. import _cuda_traces as C  # noqa: E402


class FakeCuda:
    """torch.cuda and torch._C as a two-GPU machine shows them; records each synchronize."""

    def __init__(self, contexts=(True, True)):
        self.contexts = contexts
        self.synced: list = []

    def install(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: len(self.contexts))
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: self.synced.append(device))
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA H200")
        monkeypatch.setattr(torch._C, "_cuda_hasPrimaryContext", lambda i: self.contexts[i], raising=False)


def test_synchronize_all_waits_for_every_gpu_in_use_and_creates_no_context(monkeypatch):
    fake = FakeCuda(contexts=(True, False, True))
    fake.install(monkeypatch)
    assert synchronize_all(torch) == [0, 2]
    assert fake.synced == [0, 2]  # cuda:1 has no context: nothing queued there, and no context made


def test_capture_on_the_second_gpu_synchronizes_both(monkeypatch, tmp_path):
    """Finding 7: Capture("cuda:1") (or multi-GPU code) must wait for every GPU before it stops."""
    fake = FakeCuda()
    fake.install(monkeypatch)
    written = C.KinetoFile(("NVIDIA H200", "NVIDIA H200"))
    written.kernel(10, 4, 20, 100, device=1)
    written.sync("cudaDeviceSynchronize", 20, 102, device=1)
    document = written.document()

    class FakeProfile:
        def __init__(self, activities, record_shapes=False):
            self.activities = activities

        def __enter__(self):
            fake.synced.append("profiler on")
            return self

        def __exit__(self, *exc):
            fake.synced.append("profiler off")

        def export_chrome_trace(self, path):
            import json

            with open(path, "w") as f:
                json.dump(document, f)

    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    with Capture(device="cuda:1") as cap:
        pass
    assert fake.synced == [0, 1, "profiler on", 0, 1, "profiler off"]
    t = cap.trace
    assert t.meta["source"] == "cuda" and t.meta["device"] == "NVIDIA H200"
    assert len(t.where(kind="kernel")) == 1 and t.backend_lanes[0].device == "cuda:1"


def test_a_copy_to_pageable_memory_is_a_wait_not_a_launch(tmp_path):
    """Finding 8: cudaMemcpyAsync into pageable memory holds the CPU until the copy is done; .item()'s copy
    into pinned memory returns at once and its cudaStreamSynchronize waits instead."""
    t = blocking_copies(C.blocker_demo(tmp_path))
    copies = t.where(kind="copy")
    assert len(copies) == 6
    pageable = np.array([str(n).endswith("(Device -> Pageable)") for n in copies["name"]])
    assert int(pageable.sum()) == 2  # the two .cpu() lines; .item(), float(), if and print copy into pinned memory
    calls = t.where(kind="block")
    held = calls["reason"] == BLOCKING_COPY_REASON
    assert int(held.sum()) == 2
    assert np.isin(copies["flow"][pageable], calls["flow"][held]).all()
    launched = t.where(kind="launch")
    assert np.isin(copies["flow"][~pageable], launched["flow"]).all()  # pinned copies: launches
    assert not np.isin(copies["flow"][pageable], launched["flow"]).any()
    by = blocked_time(t).set_index("reason")["total"]
    # each pinned copy's wait is in its stream synchronize, which lasts until that copy is done
    pinned_syncs = [i for i, (_, _, where) in enumerate(C.DEMO_COPIES) if where == "Pinned"]
    syncs = calls.filter(calls["name"] == "cudaStreamSynchronize")
    assert len(syncs) == 6
    order = np.argsort(syncs["start"])
    pinned_copies = copies.filter(~pageable)
    assert (syncs["end"][order][pinned_syncs] >= np.sort(pinned_copies["end"])).all()
    assert by[BLOCKING_COPY_REASON] == pytest.approx(float(np.sum(calls["end"][held] - calls["start"][held])))


def test_copies_to_pinned_memory_and_to_the_device_stay_launches(tmp_path):
    f = C.KinetoFile()
    f.memcpy(10, 3, 20, 5, what="HtoD (Pinned -> Device)", nbytes=1 << 20)
    f.memcpy(15, 3, 30, 5, what="DtoH (Device -> Pinned)", nbytes=1 << 20)
    t = blocking_copies(f.trace(tmp_path))
    assert list(t.where(kind="launch")["name"]) == ["cudaMemcpyAsync", "cudaMemcpyAsync"]
    assert len(queue_length_summary(t)) == 1


def test_each_wait_names_the_aten_op_that_made_it(tmp_path):
    """Low item: the CUDA blocker figure was one "(unknown)" bar (a CUDA capture has no source line)."""
    t = label_block_sources(blocking_copies(C.blocker_demo(tmp_path)))
    blocks = t.where(kind="block")
    sources = set(blocks["source"].tolist())
    assert {"aten::item", "aten::_to_copy", "aten::is_nonzero", "aten::_local_scalar_dense"} <= sources
    assert CAPTURE_SYNC_SOURCE in sources  # the capture's own keeps its label
    assert "" not in sources
    assert "(unknown)" not in set(blocked_time(t, by="source")["source"])


def test_a_driver_extended_launch_fills_the_queue(tmp_path):
    """Low item: cuLaunchKernelEx (Triton, cuBLASLt on CUDA 12) is a launch call."""
    assert "cuLaunchKernelEx" in LAUNCH_CALLS
    t = C.two_gpu_products(tmp_path, ops=6, call="cuLaunchKernelEx")
    launches = t.where(kind="launch")
    assert list(set(launches["name"])) == ["cuLaunchKernelEx"] and len(launches) == 12
    q, ref = queue_length_summary(t), queue_length_summary(C.two_gpu_products(tmp_path, ops=6))
    assert set(q["device"]) == {"cuda:0", "cuda:1"} and q["max"].min() >= 1
    assert q["count"].tolist() == ref["count"].tolist() and q["max"].tolist() == ref["max"].tolist()


def test_the_capture_adds_the_cuda_facts_in_one_place(tmp_path):
    from d2l_async.capture._profiler import label_final_sync

    raw = C.blocker_demo(tmp_path)
    t = label_block_sources(blocking_copies(label_final_sync(raw)))
    # the reader files the two copies into pageable memory as waits already (a trace file shows them too);
    # the capture's steps keep them, add none and name the op behind each; with the six stream syncs and the
    # capture's own synchronize, nine waits
    assert int((raw["reason"] == BLOCKING_COPY_REASON).sum()) == int((t["reason"] == BLOCKING_COPY_REASON).sum()) == 2
    assert int((t["kind"] == Kind.BLOCK.value).sum()) == int((raw["kind"] == Kind.BLOCK.value).sum()) == 9
    assert blocking_copies(raw) is raw
    assert (t["source"][t["kind"] == Kind.BLOCK.value] != "").all()


def test_the_reports_blocker_figure_of_a_cuda_capture_names_the_ops(tmp_path):
    """The report draws ``plot_blocked_time(trace, by="source")``: one "(unknown)" bar on CUDA before."""
    pytest.importorskip("plotly")
    from d2l_async.capture._profiler import label_final_sync
    from d2l_async.viz import plot_blocked_time

    raw = C.blocker_demo(tmp_path)
    t = label_block_sources(blocking_copies(label_final_sync(raw)))
    labels = {str(y) for bar in plot_blocked_time(t, by="source").data for y in list(bar.y if bar.y is not None else ())}
    assert {"aten::item", "aten::_to_copy", "aten::is_nonzero"} <= labels, labels
    assert "(unknown)" not in labels
