"""The GPU pages say what the code does: where each conversion copies (pinned or pageable memory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from . import _cuda_traces as C

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("gpu.md", "how-it-works.md")


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.;:])\s+(?=[A-Z`(])|\n\n", text.replace("\n", " ")) if s]


@pytest.mark.parametrize("page", PAGES)
def test_item_is_documented_as_the_copy_the_code_records(page):
    """``.item()`` copies into pinned memory and then synchronizes (PyTorch's ``_local_scalar_dense_cuda``, and
    the synthetic traces' record of it); a page that puts it beside pageable memory says the opposite."""
    lands = {call: where for call, _, where in C.DEMO_COPIES}
    assert lands["item"] == "Pinned" and lands["numpy"] == "Pageable"  # the code's record the page must match
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    about_item = [s for s in _sentences(text) if "`.item()`" in s and re.search(r"pinned|pageable", s, re.I)]
    assert about_item, f"{page} does not say where .item() copies"
    for s in about_item:
        clause = s[s.index("`.item()`"):]
        first = re.search(r"pinned|pageable", clause, re.I)
        assert first and first.group(0).lower() == "pinned", f"{page}: {s}"
