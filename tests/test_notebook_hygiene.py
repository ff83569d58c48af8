"""Notebooks are committed clean, carry both badges, and install the package only in Colab."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from d2l_async.config import REPO_SLUG

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert "00_tour.ipynb" in names


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.name)
def notebook(request):
    return request.param, json.loads(request.param.read_text())


def test_committed_without_outputs(notebook):
    path, nb = notebook
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{path.name} cell {i} has outputs"
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has an execution count"


def test_kernelspec_is_python3(notebook):
    path, nb = notebook
    assert nb["metadata"]["kernelspec"]["name"] == "python3", path.name


def test_first_markdown_cell_has_both_badges(notebook):
    path, nb = notebook
    first_md = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    text = "".join(first_md["source"])
    colab = f"colab.research.google.com/github/{REPO_SLUG}/blob/main/notebooks/{path.name}"
    assert colab in text and "colab-badge.svg" in text, f"{path.name}: Colab badge missing or mis-pointed"
    assert f"mybinder.org/v2/gh/{REPO_SLUG}/" in text and "badge_logo.svg" in text, f"{path.name}: Binder badge"


def test_first_code_cell_installs_only_in_colab(notebook):
    path, nb = notebook
    first_code = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
    assert '"google.colab" in sys.modules' in first_code, path.name
    assert "pip install" in first_code and "git+" in first_code and REPO_SLUG in first_code
    # Colab ships its own torch: the install must not reinstall it.
    assert "torch==" not in first_code and "--force-reinstall" not in first_code


def test_quick_mode_is_read_through_the_package(notebook):
    path, nb = notebook
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "D2L_ASYNC_QUICK" not in code, f"{path.name} parses the environment itself; use d2l_async.config.quick_mode()"


#: What JupyterLab writes into a notebook when its kernel starts (checked on JupyterLab 4.6 with ipykernel 6):
#: committed as is, so opening a notebook leaves the checkout clean (``git pull`` then works).  Only
#: ``language_info.version`` follows the kernel's Python; it is Binder's (binder/runtime.txt).
JUPYTERLAB_KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
JUPYTERLAB_LANGUAGE_INFO = {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                            "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                            "pygments_lexer": "ipython3"}


def test_metadata_is_what_jupyterlab_writes(notebook):
    path, nb = notebook
    meta = nb["metadata"]
    assert meta.get("kernelspec") == JUPYTERLAB_KERNELSPEC, path.name
    info = dict(meta.get("language_info") or {})
    version = info.pop("version", "")
    assert info == JUPYTERLAB_LANGUAGE_INFO, path.name
    runtime = (Path(__file__).parents[1] / "binder" / "runtime.txt").read_text().strip().removeprefix("python-")
    assert version.startswith(runtime + "."), f"{path.name}: language_info.version {version} is not Binder's {runtime}"


def test_written_as_jupyter_writes_it(notebook):
    """The file is nbformat's own form (sorted keys, one-space indent): what JupyterLab's save writes."""
    import nbformat

    path, _ = notebook
    text = path.read_text()
    assert text == nbformat.writes(nbformat.reads(text, as_version=4)) + "\n", (
        f"{path.name}: rewrite it with nbformat.write (or open and save it in JupyterLab)")


def test_every_check_on_the_page_names_its_claim(notebook):
    # a check the notebook builds itself must name a claim of d2l_async.claims (its falsifiers run in
    # tests/experiments/test_claims.py); a bare lesson.check/expect is prose no test can make false
    import ast

    path, nb = notebook
    bare = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        try:
            tree = ast.parse("\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"check", "expect"} and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "lesson"
                    and not any(k.arg == "claim" for k in node.keywords)):
                bare.append(ast.get_source_segment(source, node) or node.func.attr)
    assert not bare, f"{path.name}: checks that name no claim: {bare}"
