"""The chapter's static site, built once per test run in quick mode into a temporary folder.

After nbval has run every notebook in the same ``make test`` (``build/executed``, tests/notebook_run.py), the
site shows those runs and executes nothing; without a current run of every notebook it executes them itself.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ..conftest import skip_or_fail

ROOT = Path(__file__).parents[2]
HUB = "https://hub.example.edu"  # any hub: the test reads the nbgitpuller link it makes


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """``site/build_site.py --quick --executed build/executed`` run once; the built HTML folder.

    Set ``D2L_ASYNC_SITE`` to an already built site folder to test that one instead (e.g. the
    default-mode ``build/site`` from ``make site``).
    """
    given = os.environ.get("D2L_ASYNC_SITE")
    if given:
        return Path(given)
    try:
        import jupyter_book  # noqa: F401
    except ImportError:
        skip_or_fail("jupyter-book is not installed (pip install -e .[dev])")
    sys.path.insert(0, str(ROOT / "site"))
    try:
        import build_site
    finally:
        sys.path.remove(str(ROOT / "site"))
    out = tmp_path_factory.mktemp("site") / "html"
    build_site.build(out, quick=True, hub_url=HUB, work=out.with_name("work"), executed=ROOT / "build" / "executed")
    return out


@pytest.fixture(scope="session")
def facts(site) -> dict:
    return json.loads((site / "site.json").read_text())
