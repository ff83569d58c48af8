"""The generated pages follow what they are generated from: docs/numbers.md from benchmarks/results/*.json
(scripts/numbers_page.py), docs/api.md from the package's docstrings (scripts/api_page.py). Each test
fails when the committed page differs from what its generator writes now: run ``make docs``."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"_docs_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def numbers_page():
    return _script("numbers_page")


def test_the_committed_numbers_page_is_what_the_json_gives_now(numbers_page):
    committed = (ROOT / "docs" / "numbers.md").read_text()
    assert committed == numbers_page.render(RESULTS), "docs/numbers.md is stale: run `make docs`"


def test_every_result_file_has_a_place_on_the_numbers_page(numbers_page):
    page = numbers_page.render(RESULTS)
    for path in sorted(RESULTS.glob("*.json")):
        assert f"`{path.name}`" in page or f"benchmarks/results/{path.name}" in page, path.name


def test_the_numbers_come_from_the_json(numbers_page, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    engine = json.loads((results / "engine.json").read_text())
    engine["book"]["async_us_per_op"] = 123.456
    engine["book"]["ratio"] = 0.5
    engine["load_average_before"] = [7.77, 0.0, 0.0]
    (results / "engine.json").write_text(json.dumps(engine))
    torch_async = json.loads((results / "torch_async.json").read_text())
    torch_async["median"]["frontend_cpu_us"] = 987.6
    torch_async["command"] = "python benchmarks/bench_torch_async.py --repeat 99"
    (results / "torch_async.json").write_text(json.dumps(torch_async))
    page = numbers_page.render(results)
    engine_part = page.split("## The CPU engine", 1)[1].split("\n### ", 1)[0]
    assert "**123.5 µs/op**" in engine_part and "**0.50×**" in engine_part
    assert "Load average: 7.77 before" in engine_part
    assert re.search(r"ratio sync / async \(medians\) \| \*\*0\.50×\*\* \| [^|]+ \| \*\*missed\*\*", engine_part)
    assert "**987.6 µs /" in page and "`python benchmarks/bench_torch_async.py --repeat 99`" in page


def test_the_claims_table_and_the_suite_times_come_from_the_json(numbers_page, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)

    def condition(busy: int, holds: int) -> dict:
        row = {"claim": "03.narrow-sooner", "sentence": "the narrow wait lets the frontend go on sooner",
               "holds": holds, "fails": 1, "unsure": 4 - holds, "modelled": 0, "causes": {"no-spare-cpu": 1}}
        return {"condition": f"2 CPUs, beside {busy} busy processes" if busy else "2 CPUs, as is",
                "busy_processes": busy, "pinned": None, "runs": 5, "mode": "default", "machine": "a test machine",
                "load_avg_min": 3.25, "load_avg_max": 3.75, "load_avg_median": 3.5, "when": "2031-01-02 03:04:05",
                "claims": [row], "errors": {}, "missing": []}
    (results / "claims.json").write_text(json.dumps({"conditions": [condition(2, 1), condition(0, 3)]}))
    suite = json.loads((results / "test_suite.json").read_text())
    run = next(iter(suite["runs"].values()))[0]
    run["by_folder_s"] = {"tests/one_core": 600.0, "tests/browser": 90.0}
    (results / "test_suite.json").write_text(json.dumps(suite))
    page = numbers_page.render(results)
    section = page.split("## How often each headline claim holds", 1)[1].split("\n## ", 1)[0]
    # one row per claim, one column per condition (quiet first), the causes of what was not ✔ counted
    assert ("| `03.narrow-sooner` | the narrow wait lets the frontend go on sooner | 3 ✔ · 1 ✘ · 1 ? · 0 ◇ "
            "(1× no-spare-cpu) | 1 ✔ · 1 ✘ · 3 ? · 0 ◇ (1× no-spare-cpu) |") in section
    assert "load average 3.2–3.8 (median 3.5), 2031-01-02 03:04" in section
    assert "`tests/one_core` 10.0 min, `tests/browser` 1.5 min" in page


def test_a_result_file_without_a_table_is_listed_number_by_number(numbers_page, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    (results / "gpu_numbers.json").write_text(json.dumps({"what": "a GPU run", "sync_us": 41.25, "nested": {"n": 7}}))
    page = numbers_page.render(results)
    section = page.split("## `gpu_numbers.json`", 1)[1]
    assert "| `sync_us` | 41.2500 |" in section and "| `nested.n` | 7 |" in section
    assert "The GPU results are listed above: `gpu_numbers.json`." in page


def test_the_committed_api_page_is_what_the_docstrings_give_now():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "api_page.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:] + "\nrun `make docs`"


def test_the_api_page_has_every_public_name_under_its_module():
    page = (ROOT / "docs" / "api.md").read_text()
    sections = dict(re.findall(r"^## `([\w.]+)`\n(.*?)(?=^## `|\Z)", page, re.S | re.M))
    import d2l_async

    modules = ["d2l_async", *(f"d2l_async.{m}" for m in sorted(d2l_async._SUBMODULES)),
               "d2l_async.engine.core",  # the engine's declared interface for runtimes built on it
               "d2l_async.engine.minimal", "d2l_async.engine.exercise"]  # notebook 2's engine in one file
    assert sorted(sections) == sorted(modules)
    for name in modules:
        public = getattr(importlib.import_module(name), "__all__", [])
        headings = re.findall(r"^### `([\w.]+)`$", sections[name], re.M)
        assert headings == list(public), f"{name}: the page lists {headings}, __all__ is {public}"
    assert "**Returns:**" in sections["d2l_async.engine"]


def test_api_page_signatures_show_annotations_as_written():
    api = _script("api_page")

    def f(a: "int", *, b: "str | None" = None, **kw) -> "Path":
        """Do it.

        Returns:
            the new trace.
        """

    assert api.sig_text("f", f) == "f(a: int, *, b: str | None = None, **kw) -> Path"
    assert api.returns_of(f) == "`Path` — the new trace."
    assert api.summary(f.__doc__) == "Do it."
    assert api.value_text(frozenset({"b", "a"})) == "frozenset({'a', 'b'})"
