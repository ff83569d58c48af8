"""The docs/ pages staged for the static site (site/doc_pages.py): every page and image copied, the
table-of-contents entries in reading order, and every link pointing somewhere that exists in the site or
on GitHub. Also: every relative link of every page resolves in the repository, as GitHub shows them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "site"))
try:
    import doc_pages
finally:
    sys.path.remove(str(ROOT / "site"))

from d2l_async.config import REPO_SLUG  # noqa: E402

NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")


def _links(text: str) -> list[str]:
    return [m.group(1) for m in LINK.finditer(doc_pages.FENCE.sub("", text))]


def _relative(link: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:|^#", link, re.I)


def test_every_page_and_image_is_staged_with_its_toc_entry_in_reading_order(tmp_path):
    entries = doc_pages.stage_doc_pages(tmp_path, NOTEBOOKS)
    pages = sorted(p.stem for p in (ROOT / "docs").glob("*.md"))
    assert sorted(e["file"] for e in entries) == [f"docs/{p}" for p in pages]
    named = [e["file"].split("/")[1] for e in entries if e["file"].split("/")[1] in doc_pages.ORDER]
    assert named == [p for p in doc_pages.ORDER if p in pages]
    for entry in entries:
        assert (tmp_path / f"{entry['file']}.md").is_file(), entry
    for image in (ROOT / "docs" / "img").iterdir():
        assert (tmp_path / "docs" / "img" / image.name).read_bytes() == image.read_bytes()


def test_staged_links_resolve_in_the_site_or_point_at_github(tmp_path):
    for stem in NOTEBOOKS:  # build_site stages the notebooks at the source folder's top
        (tmp_path / f"{stem}.ipynb").write_text("{}")
    doc_pages.stage_doc_pages(tmp_path, NOTEBOOKS)
    seen = 0
    for page in (tmp_path / "docs").glob("*.md"):
        for link in _links(page.read_text()):
            seen += 1
            if link.startswith("http"):
                continue
            if _relative(link):
                target = (page.parent / link.partition("#")[0]).resolve()
                assert target.is_relative_to(tmp_path.resolve()) and target.exists(), f"{page.name}: {link}"
    assert seen > 0


def test_a_link_out_of_docs_becomes_a_github_link_and_a_notebook_link_its_page(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "other.md").write_text("# Other\n")
    (docs / "page.md").write_text(
        "# Page\n\nSee [the readme](../README.md), [config](../deploy/jupyterhub/config.yaml#L3), "
        "[tests](../tests/), [other](other.md), [notebook 07](../notebooks/07_automatic_parallelism.ipynb), "
        "[notebook 10](../notebooks/10_async_communication.ipynb) and [web](https://d2l.ai).\n\n"
        "```text\n[kept](../README.md)\n```\n\nand `[kept too](../README.md)`.\n")
    src = tmp_path / "src"
    entries = doc_pages.stage_doc_pages(src, ["07_automatic_parallelism"], docs=docs)
    assert entries == [{"file": "docs/other"}, {"file": "docs/page"}]
    text = (src / "docs" / "page.md").read_text()
    blob = f"https://github.com/{REPO_SLUG}/blob/main"
    assert f"[the readme]({blob}/README.md)" in text
    assert f"[config]({blob}/deploy/jupyterhub/config.yaml#L3)" in text
    assert f"[tests](https://github.com/{REPO_SLUG}/tree/main/tests)" in text
    assert "[other](other.md)" in text and "[web](https://d2l.ai)" in text
    assert "[notebook 07](../07_automatic_parallelism.ipynb)" in text
    assert f"[notebook 10]({blob}/notebooks/10_async_communication.ipynb)" in text  # not built: GitHub
    assert "```text\n[kept](../README.md)\n```" in text and "`[kept too](../README.md)`" in text


def test_a_missing_docs_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder of pages"):
        doc_pages.stage_doc_pages(tmp_path, docs=tmp_path / "nope")


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "CHANGELOG.md"],
                         ids=lambda p: p.name)
def test_every_relative_link_of_a_page_resolves_in_the_repository(page):
    for link in _links(page.read_text()):
        if _relative(link):
            target = (page.parent / link.partition("#")[0]).resolve()
            assert target.exists(), f"{page.relative_to(ROOT)}: {link} does not exist"
