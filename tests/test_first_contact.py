"""First contact: what a new reader types first works and says what it means.

- ``d2l_async.data.load_sample(...)`` (which the package's own messages recommend) after a plain
  ``import d2l_async``;
- the console script's usage line names the command that was typed (``d2l-async``), and
  ``python -m d2l_async`` names itself;
- every option of ``python -m d2l_async.distributed`` has help;
- the docs and the torchrun module's docstring give one GPU count per machine;
- a dashboard control set to an invalid value answers with the allowed values.
(The report's console width: tests/report/test_report_console.py.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def test_data_is_an_attribute_after_import():
    code = ("import d2l_async; t = d2l_async.data.load_sample('cpu_only'); "
            "print(type(t).__name__, len(d2l_async.data.SAMPLES) > 0, 'data' in dir(d2l_async))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["Trace", "True", "True"]


def test_usage_name_is_what_was_typed():
    from d2l_async.__main__ import _prog, build_parser

    assert _prog("/home/me/.venv/bin/d2l-async") == "d2l-async"
    assert _prog("/x/d2l_async/__main__.py") == "python -m d2l_async"
    assert build_parser("d2l-async").format_usage().startswith("usage: d2l-async")


def test_console_script_usage(tmp_path):
    script = Path(sys.executable).with_name("d2l-async")
    if not script.exists():
        pytest.skip("the d2l-async console script is not installed in this environment (pip install -e .)")
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: d2l-async"), proc.stdout[:200]
    proc = subprocess.run([sys.executable, "-m", "d2l_async", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.stdout.startswith("usage: python -m d2l_async"), proc.stdout[:200]


def test_every_distributed_option_has_help():
    from d2l_async.distributed.__main__ import _parser

    parser = _parser()
    bare = [a.dest for a in parser._actions if not a.help and a.dest != "help"]
    assert not bare, f"options without help: {bare}"
    text = parser.format_help()
    for option in ("--backend", "--bucket-cap-mb", "--width", "--depth", "--batch", "--steps"):
        assert re.search(rf"{option} \S+\s+\S", text) or re.search(rf"{option} \S+\n\s+\S", text), option


def test_every_report_option_has_help():
    import argparse

    from d2l_async.__main__ import build_parser

    parser = build_parser("d2l-async")
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for sub in subs:
        for name, sp in sub.choices.items():
            bare = [a.dest for a in sp._actions if not a.help and a.dest != "help"]
            assert not bare, f"{name}: options without help: {bare}"


def test_one_gpu_count_per_machine_in_the_docs():
    import d2l_async.distributed.__main__ as entry

    def counts(text: str) -> set[tuple[str, str]]:
        gpus = re.findall(r"(\w+) GPUs each", text)
        procs = re.findall(r"--nnodes 2 --nproc-per-node (\d+)", text)
        return set(gpus), set(procs)

    words = {"two": "2", "four": "4", "eight": "8"}
    notebook = (ROOT / "notebooks" / "10_async_communication.ipynb").read_text()
    page = ROOT / "docs" / "how-it-works.md"  # the page with the two-machine torchrun example
    sources = [("docs/how-it-works.md", page.read_text()), ("module docstring", entry.__doc__),
               ("notebook 10", notebook)]
    for other in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if other != page and any(counts(other.read_text())):  # any other page that shows it agrees too
            sources.append((other.relative_to(ROOT).as_posix(), other.read_text()))
    for where, text in sources:
        gpus, procs = counts(text)
        assert len(gpus) == 1 and len(procs) == 1, (where, gpus, procs)
        g = next(iter(gpus))
        assert words.get(g, g) == next(iter(procs)), f"{where}: {g} GPUs each but --nproc-per-node {procs}"
    assert len({frozenset(counts(text)[1]) for _, text in sources}) == 1, [(w, counts(t)) for w, t in sources]


def test_invalid_control_value_names_the_allowed_values():
    from traitlets import TraitError

    from d2l_async.widgets._controls import dropdown, log_slider

    d = dropdown("blocker", ["print", "item"])
    with pytest.raises(TraitError, match=r"blocker: 'x' is not one of the allowed values: 'print', 'item'"):
        d.value = "x"
    d.value = "item"
    assert d.value == "item"
    s = log_slider("size", 4, 1, 16)
    with pytest.raises(TraitError, match="1, 2, 4, 8, 16"):
        s.value = 3
