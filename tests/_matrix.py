"""The version matrix: plotly / ipywidgets versions other than the pinned ones, for a kernel of their own.

Each entry is a set of packages installed (without their dependencies) into a folder that is put first on
the kernel's ``PYTHONPATH``, so the kernel imports them instead of the environment's, and the environment
variables the kernel gets.  The folders are kept under ``build/matrix/`` between runs.

* ``plotly6`` -- plotly 6.0.1, the first plotly built on anywidget (the release plotly.py issue 4998 was
  filed against).
* ``colab`` -- what Colab ships (plotly 5.24, ipywidgets 7.7) and the mode a dashboard takes there
  (``output``: a plain figure redrawn in an ``Output`` widget).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

MATRIX = {
    "plotly6": {"packages": ["plotly==6.0.1"], "env": {}},
    "colab": {"packages": ["plotly==5.24.1", "ipywidgets==7.7.1", "ipykernel==6.17.1", "tenacity", "ipython-genutils==0.2.0"],
              "env": {"D2L_ASYNC_FIGURES": "output"}},
}


def install(name: str) -> tuple[Path, dict[str, str]]:
    """Install entry ``name``'s packages once (``build/matrix/<name>``).

    Returns:
        The folder and the environment a kernel of that entry needs (``PYTHONPATH`` and the entry's variables).
    """
    spec = MATRIX[name]
    site = ROOT / "build" / "matrix" / name
    stamp = site / ".installed"
    wanted = "\n".join(spec["packages"])
    site.parent.mkdir(parents=True, exist_ok=True)
    with open(site.parent / f".{name}.lock", "w") as lock:  # two xdist workers may ask at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != wanted:
            shutil.rmtree(site, ignore_errors=True)
            done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                                   *spec["packages"]], capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                message = f"could not install {spec['packages']} for the {name} kernel: {done.stderr[-800:]}"
                if os.environ.get("CI", "").lower() == "true":
                    pytest.fail(message)
                pytest.skip(message)
            stamp.write_text(wanted)
    return site, {"PYTHONPATH": str(site), **spec["env"]}
