"""Record HTA 0.5.0's queue-length numbers for every test trace into ``hta_oracle.json``.

HolisticTraceAnalysis is the oracle of the queue analysis, but HTA 0.5.0 fails under pandas 3 on
some traces (``transform_correlation_to_index`` puts row indices into an ``int8`` column when the
correlation ids are small: pandas 3 refuses what pandas 2 silently upcast), and the development
environment pins pandas 3.1.1 (``binder/constraints.txt``: what Binder installs; the oracle is no
reason to give students an older pandas).  So the oracle's numbers are recorded once, here, in an
environment with the pandas HTA 0.5.0 was written for, and ``tests/trace/test_hta_oracle.py``
compares the package with them everywhere (and with HTA itself, live, where HTA works)::

    python3.11 -m venv /tmp/hta-env
    /tmp/hta-env/bin/pip install holistictraceanalysis==0.5.0 pandas==2.3.3
    /tmp/hta-env/bin/python tests/trace/data/record_hta_oracle.py

Needs only HTA and the standard library: the generated traces come from
``tests/trace/generated_traces.py`` (standard library too), the public ones from this folder and
``d2l_async/data``.  Rerun it when a trace is added or a generator changes.
"""

from __future__ import annotations

import json
import logging
import platform
import shutil
import sys
import tempfile
import warnings
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))
from generated_traces import CASES, write_case  # noqa: E402

OUT = HERE / "hta_oracle.json"
#: case -> a trace file (copied alone into a folder) or a folder of rank files
PUBLIC = {
    **{name: HERE / "public" / f"{name}.json.gz" for name in (
        "a100_rank3_of_8", "backward_thread", "kineto2021_resnet50_workers4", "mtia_single_rank",
        "rocm62_mi250_minitoy", "triton_example")},
    **{name: ROOT / "d2l_async" / "data" / f"{name}.json.gz" for name in (
        "a100_alexnet", "a100_cuda_event_sync", "a100_nccl_step", "a100_simple_add", "a100_training_step",
        "v100_training_step")},
    "hta_sampled_pair": HERE / "public" / "hta_sampled_pair",
    "gloo_pair": HERE / "gloo_pair",
}


def hta_rows(folder: Path, include: bool) -> list[list]:
    """HTA's ``get_queue_length_summary`` over every rank: ``[rank, stream, count, max, mean]``."""
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=include)
    s = ta.get_queue_length_summary(ranks=sorted(ta.t.traces))
    if s is None or not len(s):
        return []
    s = s.droplevel(0, axis=1).reset_index()
    return sorted([int(r["rank"]), int(r["stream"]), int(r["count"]), int(r["max"]), float(r["mean"])]
                  for _, r in s.iterrows())


def main() -> int:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    cases: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folders = {}
        for name, src in PUBLIC.items():
            if src.is_dir():
                folders[name] = (src, f"{src.relative_to(ROOT)}")
            else:
                d = Path(tmp) / name
                d.mkdir()
                shutil.copy(src, d)
                folders[name] = (d, f"{src.relative_to(ROOT)}")
        for name in CASES:
            folders[name] = (write_case(name, Path(tmp) / name), f"generated: generated_traces.CASES[{name!r}]")
        for name, (folder, source) in folders.items():
            cases[name] = {"source": source,
                           "without_last_step": hta_rows(folder, False), "with_last_step": hta_rows(folder, True)}
            print(name, cases[name]["without_last_step"][:3])
    versions = {p: metadata.version(p) for p in ("holistictraceanalysis", "pandas", "numpy")}
    OUT.write_text(json.dumps({"recorded_with": {**versions, "python": platform.python_version()},
                               "command": "tests/trace/data/record_hta_oracle.py", "rows": "rank, stream, count, max, mean",
                               "cases": cases}, indent=1) + "\n")
    print(f"wrote {OUT} ({len(cases)} cases, {versions})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
