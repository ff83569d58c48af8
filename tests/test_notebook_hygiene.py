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
