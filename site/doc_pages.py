"""The pages of ``docs/`` in the static site: copied into the Jupyter Book source folder beside the notebooks.

The pages are written to read on GitHub, so their relative links point at files of the repository
(``../README.md``, ``../deploy/jupyterhub/config.yaml``, ``../notebooks/07_automatic_parallelism.ipynb``).
In the site only the pages and the notebooks exist, so while copying, each relative link is rewritten:
to another page or an image of ``docs/`` it stays as it is; to a notebook the site builds it points at
that notebook's page; to anything else it points at the file on GitHub (``REPO_SLUG``, branch ``main``).
Links inside code blocks and inline code are left alone.

``site/build_site.py`` calls :func:`stage_doc_pages` after staging the notebooks and appends what it
returns to the table of contents' chapters.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT))

from d2l_async.config import REPO_SLUG  # noqa: E402

BRANCH = "main"
#: the order of the pages in the site's table of contents; pages not named here follow, by name
ORDER = ("lecturers-guide", "how-it-works", "plain-pytorch", "jax", "testing", "gpu", "numbers", "api")

FENCE = re.compile(r"^```.*?^```[^\n]*$|`[^`\n]+`", re.S | re.M)
LINK = re.compile(r"(!?\[[^\]\n]*\]\()([^)\s]+)(\))")


def _target(link: str, *, page_dir: Path, docs: Path, stems: set[str], repo: str) -> str:
    """Where a link of a page in ``docs/`` should point in the site (see the module docstring)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", link, re.I):  # http:, mailto:, an anchor, an absolute path
        return link
    path, sep, anchor = link.partition("#")
    resolved = (page_dir / path).resolve()
    if resolved.is_relative_to(docs.resolve()) and resolved.exists():
        return link
    root = docs.resolve().parent  # the repository the pages belong to
    try:
        rel = resolved.relative_to(root)
    except ValueError:
        raise ValueError(f"a link out of the repository: {link!r} in {page_dir}") from None
    if rel.parent == Path("notebooks") and rel.suffix == ".ipynb" and rel.stem in stems:
        return f"../{rel.name}" + (sep + anchor if sep else "")
    kind = "tree" if (root / rel).is_dir() or link.endswith("/") else "blob"
    return f"https://github.com/{repo}/{kind}/{BRANCH}/{rel.as_posix()}" + (sep + anchor if sep else "")


def rewrite_links(text: str, *, page_dir: Path, docs: Path = DOCS, stems: set[str] = frozenset(),
                  repo: str = REPO_SLUG) -> str:
    """``text`` with every relative Markdown link outside code rewritten for the site."""
    out, last = [], 0
    for code in FENCE.finditer(text):
        out.append(LINK.sub(lambda m: m.group(1) + _target(m.group(2), page_dir=page_dir, docs=docs, stems=stems,
                                                            repo=repo) + m.group(3), text[last:code.start()]))
        out.append(code.group(0))
        last = code.end()
    out.append(LINK.sub(lambda m: m.group(1) + _target(m.group(2), page_dir=page_dir, docs=docs, stems=stems,
                                                        repo=repo) + m.group(3), text[last:]))
    return "".join(out)


def stage_doc_pages(src: Path, stems: list[str] | tuple[str, ...] = (), *, docs: Path = DOCS) -> list[dict[str, str]]:
    """Copy ``docs/*.md`` (and ``docs/img/``) into ``src/docs/`` of a Jupyter Book source folder.

    Args:
        src: the book's source folder (where ``_toc.yml`` and the staged notebooks are).
        stems: the notebooks the site builds (``"07_automatic_parallelism"``): links to them point at their
            pages; links to other notebooks point at GitHub.
        docs: the folder of pages (default: the repository's ``docs/``).

    Returns:
        The table-of-contents entries, one ``{"file": "docs/<page>"}`` per page, in reading order: append
        them to ``_toc.yml``'s ``chapters``.
    """
    if not docs.is_dir():
        raise FileNotFoundError(f"docs={str(docs)!r}: no such folder of pages")
    dest = src / "docs"
    dest.mkdir(parents=True, exist_ok=True)
    pages = sorted(docs.glob("*.md"), key=lambda p: (ORDER.index(p.stem) if p.stem in ORDER else len(ORDER), p.stem))
    for page in pages:
        text = rewrite_links(page.read_text(encoding="utf-8"), page_dir=page.parent, docs=docs, stems=set(stems))
        (dest / page.name).write_text(text, encoding="utf-8")
    if (docs / "img").is_dir():
        shutil.copytree(docs / "img", dest / "img", dirs_exist_ok=True)
    return [{"file": f"docs/{page.stem}"} for page in pages]
