"""Write the badge cell and the Colab install cell of every notebook from one place.

The repository the badges point to is ``d2l_async.config.REPO_SLUG``; change it there, run
``python scripts/badges.py``, and every notebook's first markdown cell (badges) and first code cell
(the Colab-only install) are rewritten.  The rest of each notebook is left alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))
from d2l_async.config import REPO_SLUG  # noqa: E402

BADGE_MARK = "<!-- badges -->"
COLAB_MARK = "# Colab only:"


def badge_markdown(name: str) -> str:
    colab = f"https://colab.research.google.com/github/{REPO_SLUG}/blob/main/notebooks/{name}"
    binder = f"https://mybinder.org/v2/gh/{REPO_SLUG}/HEAD?urlpath=lab/tree/notebooks/{name}"
    return (
        f"{BADGE_MARK}\n"
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab}) "
        f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder})"
    )


def colab_cell() -> str:
    return (
        f"{COLAB_MARK} install d2l-async from GitHub. Colab's own torch, plotly and ipywidgets\n"
        "# already satisfy its requirements, so nothing of theirs is reinstalled.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install -q "d2l-async @ git+https://github.com/{REPO_SLUG}"'
    )


def apply(path: Path) -> bool:
    nb = nbformat.read(path, as_version=4)
    changed = False
    md = next(c for c in nb.cells if c.cell_type == "markdown")
    lines = md.source.split("\n")
    body = [l for l in lines if l != BADGE_MARK and "colab-badge.svg" not in l]
    new_md = badge_markdown(path.name) + "\n" + "\n".join(body)
    if md.source != new_md:
        md.source, changed = new_md, True
    code = next(c for c in nb.cells if c.cell_type == "code")
    if code.source.startswith(COLAB_MARK):
        if code.source != colab_cell():
            code.source, changed = colab_cell(), True
    else:
        nb.cells.insert(nb.cells.index(code), nbformat.v4.new_code_cell(colab_cell()))
        changed = True
    for cell in nb.cells:  # committed clean
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    if changed:
        nbformat.write(nb, path)
    return changed


def write_notebook(name: str, cells: list[tuple[str, str]]) -> Path:
    """Write ``notebooks/<name>`` from ``[("md"|"code", source), ...]``, clean, with the header cells.

    The first cell should be the markdown title; the badges and the Colab cell are added here.
    """
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, source in cells:
        if kind not in ("md", "code"):
            raise ValueError(f"cell kind must be 'md' or 'code', got {kind!r}")
        make = nbformat.v4.new_markdown_cell if kind == "md" else nbformat.v4.new_code_cell
        nb.cells.append(make(source.strip("\n")))
    path = ROOT / "notebooks" / name
    nbformat.write(nb, path)
    apply(path)
    return path


if __name__ == "__main__":
    for nb_path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        print(("updated " if apply(nb_path) else "ok      ") + nb_path.name)
