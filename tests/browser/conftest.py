"""A real JupyterLab in a temporary folder (the browser is the suite's one Chromium, tests/conftest.py)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from ..conftest import skip_or_fail
from .. import _matrix
from . import _lab

ROOT = Path(__file__).parents[2]
BUILD = ROOT / "build" / "browser"



@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """`jupyter lab` on a free loopback port with a random token, serving a copy of the notebooks."""
    if not shutil.which("jupyter", path=str(Path(sys.executable).parent)):
        skip_or_fail("jupyter is not installed in this environment")
    try:
        with _lab.lab_server(tmp_path_factory.mktemp("lab")) as lab:
            yield lab
    except _lab.LabDidNotStart as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """Where screenshots go: build/browser/ (kept for a human to look at)."""
    BUILD.mkdir(parents=True, exist_ok=True)
    return BUILD


def matrix_kernel(lab: dict, name: str) -> str:
    """Register a kernel with the lab server for the version-matrix entry ``name`` (see :mod:`tests._matrix`).

    Returns:
        The kernel's name.
    """
    site, env = _matrix.install(name)
    kernel = f"d2l-{name}"
    target = lab["share"] / "kernels" / kernel
    target.mkdir(parents=True, exist_ok=True)
    (target / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python 3 ({name})", "language": "python", "env": env,
    }))
    return kernel
