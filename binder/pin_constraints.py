"""Write ``binder/constraints.txt``: the exact versions Binder installs, taken from a tested environment.

``binder/requirements.txt`` names what the notebooks need (with ranges) and applies
``-c constraints.txt``, so every rebuild of the Binder image installs exactly these versions instead
of whatever is newest that day. The Makefile installs the development environment with the same
constraints, so ``make test`` (and CI) test exactly the versions Binder gets;
``tests/test_install_files.py`` checks that the pins satisfy pyproject's ranges and the torch floor.

Run it inside the environment whose tests passed, after changing a requirement::

    .venv/bin/python binder/pin_constraints.py

It walks the requirement graph of ``binder/requirements.txt`` through the installed packages'
metadata (markers evaluated for this machine: Linux, CPython 3.11, like Binder's image) and writes
one ``name==version`` line per package, the local ``+cpu`` label dropped (pip's ``==`` ignores it).
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent
HEADER = """\
# Exact versions of everything binder/requirements.txt installs (its closure), written by
# binder/pin_constraints.py from the environment `make test` passed in. Binder installs these
# (requirements.txt applies them with -c constraints.txt); the Makefile installs the dev environment with
# them too, so the tests run on exactly what Binder gets. Python 3.11 (runtime.txt), Linux.
"""


def top_level(requirements: Path) -> list[Requirement]:
    """The requirements named in ``requirements`` (options such as ``-c`` and index URLs skipped)."""
    out = []
    for line in requirements.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            out.append(Requirement(line))
    return out


def closure(roots: list[Requirement]) -> dict[str, str]:
    """canonical name -> installed version of ``roots`` and everything they require, recursively."""
    pinned: dict[str, str] = {}
    todo = [(r, ()) for r in roots]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (extras or ("",))):
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError as exc:
            raise SystemExit(f"{req.name} is not installed here: pin from the environment the tests ran in") from exc
        version = dist.version.split("+")[0]
        if not req.specifier.contains(version, prereleases=True):
            raise SystemExit(f"installed {req.name} {version} does not satisfy {req}")
        new_extras = tuple(sorted(req.extras))
        if name in pinned and not new_extras:
            continue
        pinned[name] = version
        for sub in dist.requires or ():
            todo.append((Requirement(sub), new_extras))
    return pinned


def main() -> int:
    pins = closure(top_level(HERE / "requirements.txt"))
    lines = [f"{name}=={version}" for name, version in sorted(pins.items())]
    (HERE / "constraints.txt").write_text(HEADER + "\n".join(lines) + "\n")
    print(f"binder/constraints.txt: {len(lines)} exact pins (torch=={pins.get('torch')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
