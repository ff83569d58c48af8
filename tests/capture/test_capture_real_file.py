"""The synthetic CUDA traces (tests/_cuda_traces.py) against a real capture of the same program.

Every CUDA lesson check is tested on files that :class:`tests._cuda_traces.KinetoFile` writes; those
tests are only as good as the generator's likeness to what torch's profiler really writes.  The device
probe (``../shared/gpu/probe.py``) captures one small program on a GPU and brings the raw Kineto file
back; committed as ``tests/data/<gpu>_capture.json.gz`` (or named by ``D2L_ASYNC_REAL_CUDA_TRACE``), it
is compared here with :func:`tests._cuda_traces.probe_capture`, the generator's file of the same program:
the fields the generator writes must all be in the real file, and the launch calls, copy kinds,
synchronizes and launch latency of the same operations must agree.  Until such a file exists every test
here is skipped, saying so.
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import warnings
from pathlib import Path

import pytest

from .. import _cuda_traces as C

DATA = Path(__file__).resolve().parents[1] / "data"


def _real_files() -> list[Path]:
    named = os.environ.get("D2L_ASYNC_REAL_CUDA_TRACE")
    if named:
        return [Path(named)]
    return sorted(DATA.glob("*_capture.json.gz")) + sorted(DATA.glob("*_capture.json"))


REAL = _real_files()
pytestmark = pytest.mark.skipif(
    not REAL, reason="no real CUDA capture under tests/data/ yet: a GPU run of ../shared/gpu/probe.py brings one "
                     "back (h200_capture.json.gz), to be committed there")


def _load(path: Path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


@pytest.fixture(scope="module", params=REAL or [None], ids=lambda p: p.name if p else "none")
def real(request) -> dict:
    return _load(request.param)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> dict:
    return _load(C.probe_capture(tmp_path_factory.mktemp("synthetic")))


def _x(doc: dict, cat: str | None = None) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and (cat is None or e.get("cat") == cat)]


def _arg_keys(doc: dict, cat: str) -> set[str]:
    return {k for e in _x(doc, cat) for k in e.get("args", {})}


def _calls(doc: dict) -> list[dict]:
    return sorted((e for e in _x(doc) if e.get("cat") in ("cuda_runtime", "cuda_driver")), key=lambda e: e["ts"])


def _call_of(doc: dict, device_event: dict) -> dict:
    corr = device_event["args"]["correlation"]
    (call,) = [e for e in _calls(doc) if e.get("args", {}).get("correlation") == corr]
    return call


def _inside(doc: dict, op: str) -> list[dict]:
    """Device work launched by calls made inside the ``cpu_op`` slices named ``op``."""
    ops = [e for e in _x(doc, "cpu_op") if e["name"] == op]
    device = {e["args"]["correlation"]: e for e in _x(doc) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    out = []
    for call in _calls(doc):
        corr = call.get("args", {}).get("correlation")
        if corr in device and any(o["tid"] == call["tid"] and o["ts"] <= call["ts"] <= o["ts"] + o["dur"] for o in ops):
            out.append(device[corr])
    return out


# -- the file's shape: nothing the generator writes is missing from a real capture --------------------------------
def test_the_generator_writes_only_top_level_fields_a_capture_has(real, synthetic):
    assert set(synthetic) - {"traceEvents"} <= set(real), sorted(set(synthetic) - set(real))


def test_the_generator_writes_only_categories_a_capture_has(real, synthetic):
    cats = {e.get("cat") for e in _x(synthetic)}
    assert cats <= {e.get("cat") for e in _x(real)}, cats - {e.get("cat") for e in _x(real)}


@pytest.mark.parametrize("cat", ["cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "cuda_sync"])
def test_each_categorys_arguments_are_ones_a_capture_writes(real, synthetic, cat):
    assert _arg_keys(synthetic, cat) <= _arg_keys(real, cat), sorted(_arg_keys(synthetic, cat) - _arg_keys(real, cat))


def test_flows_metadata_and_timestamps_are_written_alike(real, synthetic):
    def flow_keys(doc, ph):
        return {k for e in doc["traceEvents"] if e.get("ph") == ph for k in e}

    for ph in ("s", "f"):
        assert flow_keys(synthetic, ph) <= flow_keys(real, ph), ph
    assert {e.get("cat") for e in real["traceEvents"] if e.get("ph") in ("s", "f")} == {"ac2g"}
    meta = {e["name"] for e in synthetic["traceEvents"] if e.get("ph") == "M"}
    assert meta <= {e["name"] for e in real["traceEvents"] if e.get("ph") == "M"}
    labels = {e["args"].get("labels") for e in real["traceEvents"] if e.get("name") == "process_labels"}
    assert "GPU 0" in labels, labels

    def fractional(doc):
        return any(float(e["ts"]) != int(float(e["ts"])) for e in _x(doc))

    assert fractional(synthetic) == fractional(real)


# -- the same operations: the same calls, copies and waits ---------------------------------------------------------
def test_an_elementwise_kernel_and_a_product_are_launched_by_the_same_calls(real, synthetic):
    def launchers(doc, op):
        return {(c["cat"], c["name"]) for c in (_call_of(doc, k) for k in _inside(doc, op) if k.get("cat") == "kernel")}

    for op in ("aten::add", "aten::mm"):
        got, want = launchers(real, op), launchers(synthetic, op)
        assert got and got == want, (op, got, want)


def test_item_copies_into_pinned_memory_then_synchronizes_and_cpu_into_pageable(real, synthetic):
    def copies(doc):
        return {e["args"]["bytes"]: e for e in _x(doc, "gpu_memcpy") if e["name"].startswith("Memcpy DtoH")}

    real_copies, synthetic_copies = copies(real), copies(synthetic)
    for nbytes in (4, 4 << 20):  # b.sum().item(), big.cpu()
        assert real_copies[nbytes]["name"] == synthetic_copies[nbytes]["name"], nbytes
    calls = _calls(real)
    item_call = _call_of(real, real_copies[4])
    after = [c for c in calls if c["tid"] == item_call["tid"] and c["ts"] > item_call["ts"]]
    assert after and after[0]["name"] == "cudaStreamSynchronize", [c["name"] for c in after[:3]]


def test_the_reader_files_the_real_copies_as_the_generators(real, synthetic, tmp_path):
    from d2l_async.trace import BLOCKING_COPY_REASON, UnplacedDeviceEvents, read_chrome_trace

    def read(doc, name):
        path = tmp_path / name
        path.write_text(json.dumps(doc))
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnplacedDeviceEvents)
            return read_chrome_trace(path)

    for t in (read(real, "real.json"), read(synthetic, "synthetic.json")):
        assert t.backend_lanes
        held = t.where(kind="block")
        assert int((held["reason"] == BLOCKING_COPY_REASON).sum()) == 1  # big.cpu() only; item's copy is pinned


def test_the_generators_launch_latency_is_a_real_gpus(real):
    """tests/_cuda_traces.LAUNCH_LATENCY_US: a kernel's start after its launch call began, on an idle stream."""
    adds = sorted(_inside(real, "aten::add"), key=lambda k: k["ts"])
    idle = [k for prev, k in zip(adds, adds[1:]) if k["ts"] - (prev["ts"] + prev["dur"]) > 5]
    latency = statistics.median(k["ts"] - _call_of(real, k)["ts"] for k in idle or adds)
    assert C.LAUNCH_LATENCY_US / 3 <= latency <= 3 * C.LAUNCH_LATENCY_US, latency
