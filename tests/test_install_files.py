"""Binder and conda install the package with its dependencies listed by hand (Binder's postBuild uses
``--no-deps`` to keep the CPU torch): every runtime dependency of pyproject.toml must be listed there too,
or the notebooks fail on Binder with an ImportError that no test here would see."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]
# The same package under another name in each file.
ALIASES = {"torch": {"torch", "pytorch"}}


def _names(lines: list[str]) -> set[str]:
    out = set()
    for line in lines:
        line = line.split("#")[0].strip().lstrip("-").strip()
        if not line or line.startswith(("pip", "python", "cpuonly", "--", "-e")) or line.endswith(":"):
            continue
        out.add(re.split(r"[<>=!\[ ]", line, maxsplit=1)[0].lower())
    return out


def _runtime() -> set[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!\[ ]", d, maxsplit=1)[0].lower() for d in deps}


def _missing(listed: set[str]) -> list[str]:
    return sorted(d for d in _runtime() if not (ALIASES.get(d, {d}) & listed))


def test_binder_lists_every_runtime_dependency():
    listed = _names((ROOT / "binder" / "requirements.txt").read_text().splitlines())
    assert not _missing(listed), f"binder/requirements.txt lacks {_missing(listed)}"


def test_environment_yml_lists_every_runtime_dependency():
    listed = _names((ROOT / "environment.yml").read_text().splitlines())
    assert not _missing(listed), f"environment.yml lacks {_missing(listed)}"
