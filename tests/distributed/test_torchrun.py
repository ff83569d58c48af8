"""The same rank functions under torchrun (what the README shows for several machines)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from d2l_async.distributed.__main__ import _parser, main, options_for
from d2l_async.trace import read_trace_dir

pytestmark = pytest.mark.timeout(200)


def test_options_follow_the_command_line():
    fn, opts = options_for(_parser().parse_args(["straggler", "--delay-ms", "30"]), world_size=4)
    assert fn.__name__ == "training_rank"
    assert [s["label"] for s in opts["settings"]] == ["even", "straggler"]
    assert opts["settings"][1]["delay_s"] == pytest.approx(0.03) and opts["settings"][1]["slow_rank"] == 3
    fn, opts = options_for(_parser().parse_args(["collective", "--numel", "1000"]), world_size=2)
    assert fn.__name__ == "collective_rank" and opts["numel"] == 1000


def test_the_collective_defaults_are_the_notebooks():
    """Without options the CLI sizes the all-reduce and the product as run_collective does in full
    mode (it once all-reduced 4M floats beside a 512 product: a 3 ms product against a 27 ms
    reduction, too little work to overlap)."""
    from d2l_async.distributed.ranks import DEFAULT_NUMEL, DEFAULT_SIZE

    _, opts = options_for(_parser().parse_args(["collective"]), world_size=2)
    assert (opts["numel"], opts["size"]) == (DEFAULT_NUMEL[0], DEFAULT_SIZE[0])
    _, opts = options_for(_parser().parse_args(["collective", "--size", "256"]), world_size=2)
    assert opts["size"] == 256


def test_without_torchrun_it_says_how_to_start(monkeypatch, capsys):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert main(["overlap"]) == 2
    assert "start this with torchrun" in capsys.readouterr().err


def test_torchrun_two_ranks_write_a_trace_dir(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun is not installed beside this Python")
    out = subprocess.run(
        [str(torchrun), "--standalone", "--nproc-per-node", "2", "-m", "d2l_async.distributed", "collective",
         "--numel", "4096", "--steps", "1", "--backend", "gloo", "--trace-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    assert sorted(l["rank"] for l in lines) == [0, 1] and all(l["result"]["correct"] for l in lines)
    merged = read_trace_dir(tmp_path / "collective")
    assert merged.ranks == (0, 1)
    # one line (the machine's first rank) says where the traces went and how to load them
    pointer = [l for l in out.stdout.splitlines() if l.startswith("traces of ranks")]
    assert pointer == [f"traces of ranks 0-1 in {tmp_path}: collective/ (rank<R>.json each); load one with "
                       f"d2l_async.trace.read_trace_dir({str(tmp_path / 'collective')!r})"], out.stdout
