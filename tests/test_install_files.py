"""The install files agree: pyproject.toml, environment.yml, binder/, the Makefile, the README and docs/.

Binder and conda install the package with its dependencies listed by hand (Binder's postBuild uses
``--no-deps`` to keep the CPU torch): every runtime dependency of pyproject.toml must be listed there
too, or the notebooks fail on Binder with an ImportError that no test here would see. They must also
agree on *versions*: one torch floor — the package's own ``MIN_VERSION``, read from the
code — one tested list (``TESTED_VERSIONS``), and Binder's exact pins (``binder/constraints.txt``)
inside every range, so a Binder rebuild installs what ``make test`` tested.
"""

from __future__ import annotations

import ast
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).parents[1]
#: what a reader reads about installing: the README and the pages under docs/
DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The same package under another name in each file.
ALIASES = {"torch": {"torch", "pytorch", "pytorch-cpu"}}


def _package_constant(name: str):
    """The value of the module-level constant ``name`` in the package (read from source: no torch import)."""
    found = []
    for path in sorted((ROOT / "d2l_async").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append((path, ast.literal_eval(node.value)))
    assert len(found) == 1, f"expected one definition of {name} in d2l_async, found {[str(p) for p, _ in found]}"
    return found[0][1]


def _floor() -> tuple[int, int]:
    value = tuple(_package_constant("MIN_VERSION"))
    return value[0], value[1]


def _tested() -> set[tuple[int, int]]:
    out = set()
    for v in _package_constant("TESTED_VERSIONS"):
        major, minor = (int(p) for p in str(v).split(".")[:2])
        out.add((major, minor))
    return out


def _lines(path: Path) -> list[str]:
    """Requirement-like lines: comments, pip options (-c, --extra-index-url, -e) and YAML keys dropped."""
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("- "):
            line = line[2:].strip()
        if not line or line.startswith("-") or line.endswith(":") or line in {"pip", "nodefaults"}:
            continue
        out.append(line)
    return out


def _name(spec: str) -> str:
    return canonicalize_name(re.split(r"[<>=!\[ ]", spec, maxsplit=1)[0])


def _runtime() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def _dev() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]


def _missing(listed: set[str]) -> list[str]:
    return sorted(d for d in map(_name, _runtime()) if not (ALIASES.get(d, {d}) & listed))


def _conda_deps() -> list[str]:
    return [line for line in _lines(ROOT / "environment.yml")
            if not line.startswith(("name", "channels", "dependencies", "conda-forge", "python"))]


def _pins() -> dict[str, Version]:
    pins = {}
    for line in _lines(ROOT / "binder" / "constraints.txt"):
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9][A-Za-z0-9_.]*)", line)
        assert m, f"binder/constraints.txt: {line!r} is not an exact pin name==version"
        pins[canonicalize_name(m.group(1))] = Version(m.group(2))
    return pins


def _torch_floor(spec: str, where: str) -> tuple[int, int]:
    m = re.fullmatch(r"(?:torch|pytorch|pytorch-cpu)\s*>=\s*(\d+)\.(\d+)", spec.strip())
    assert m, f"{where}: torch requirement {spec!r} should be a plain floor 'torch>=X.Y'"
    return int(m.group(1)), int(m.group(2))


# -- every dependency listed --------------------------------------------------------------------------


def test_binder_lists_every_runtime_dependency():
    listed = {_name(s) for s in _lines(ROOT / "binder" / "requirements.txt")}
    assert not _missing(listed), f"binder/requirements.txt lacks {_missing(listed)}"


def test_environment_yml_lists_every_runtime_dependency():
    listed = {_name(s) for s in _conda_deps()}
    assert not _missing(listed), f"environment.yml lacks {_missing(listed)}"


# -- one torch floor, one tested list ------------------------------------------------------------------


def test_one_torch_floor_everywhere():
    floor = _floor()
    torch_specs = {
        "pyproject.toml": [d for d in _runtime() if _name(d) == "torch"],
        "binder/requirements.txt": [d for d in _lines(ROOT / "binder" / "requirements.txt") if _name(d) == "torch"],
        "environment.yml": [d for d in _conda_deps() if _name(d) in ALIASES["torch"]],
    }
    for where, specs in torch_specs.items():
        assert len(specs) == 1, f"{where}: expected one torch requirement, found {specs}"
        assert _torch_floor(specs[0], where) == floor, \
            f"{where}: {specs[0]!r}, but the package's MIN_VERSION is {floor[0]}.{floor[1]}"
    for page in (ROOT / "README.md", ROOT / "docs" / "testing.md"):
        floors = set(re.findall(r"torch>=(\d+\.\d+)", page.read_text()))
        assert floors == {f"{floor[0]}.{floor[1]}"}, f"{page.name} names torch floors {floors}, package: {floor}"
    for page in DOC_PAGES:  # any other page that names a floor names the same one
        floors = set(re.findall(r"torch>=(\d+\.\d+)", page.read_text()))
        assert floors <= {f"{floor[0]}.{floor[1]}"}, f"{page.name} names torch floors {floors}, package: {floor}"


def test_the_docs_name_the_tested_torch_versions():
    m = re.search(r"Tested torch versions: ([^.\n]+(?:\.\d+)*[^\n]*)", (ROOT / "docs" / "testing.md").read_text())
    assert m, "docs/testing.md lacks its 'Tested torch versions: ...' line"
    for page in DOC_PAGES:
        for line in re.findall(r"Tested torch versions: ([^.\n]+(?:\.\d+)*[^\n]*)", page.read_text()):
            named = {(int(a), int(b)) for a, b in re.findall(r"\b(\d+)\.(\d+)(?:\.\d+)?\b", line)}
            assert named == _tested(), \
                f"{page.name}'s tested list {sorted(named)} != TESTED_VERSIONS {sorted(_tested())}"


def test_environment_yml_is_conda_forge_only():
    text = (ROOT / "environment.yml").read_text()
    channels = re.search(r"channels:\n((?:\s+- .*\n)+)", text).group(1)
    names = [c.strip()[2:].strip() for c in channels.splitlines()]
    assert names[0] == "conda-forge" and set(names) <= {"conda-forge", "nodefaults"}, names
    deps = {_name(d) for d in _conda_deps()}
    assert "cpuonly" not in deps, "cpuonly is the retired pytorch channel's switch; use pytorch-cpu"
    assert deps & {"pytorch", "pytorch-cpu"}, "environment.yml installs no torch"


# -- Binder pinned, and the pins tested ------------------------------------------------------------------


def test_binder_applies_its_constraints():
    raw = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    assert "-c constraints.txt" in [line.strip() for line in raw]


def test_every_binder_requirement_is_pinned_inside_every_range():
    pins = _pins()
    ranges = [*_lines(ROOT / "binder" / "requirements.txt"), *_runtime()]
    for spec in ranges:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"binder/constraints.txt does not pin {name} (from {spec!r})"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"pin {name}=={pins[name]} is outside {spec!r}"


def test_pinned_torch_is_a_tested_version_and_the_makefiles():
    torch = _pins()["torch"]
    assert (torch.major, torch.minor) in _tested(), f"Binder pins torch {torch}, tested: {sorted(_tested())}"
    assert (torch.major, torch.minor) >= _floor()
    make_torch = re.search(r"^TORCH\s*\?=\s*torch==(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert Version(make_torch) == torch, f"Makefile installs torch {make_torch}, Binder pins {torch}"
    assert "-c $(CONSTRAINTS)" in (ROOT / "Makefile").read_text()


def test_this_environment_has_the_pinned_versions():
    """`make` installs the dev environment with Binder's constraints: the tests run on Binder's versions.

    Fails where a package was upgraded by hand after ``make`` (rerun ``make`` or re-pin with
    ``binder/pin_constraints.py`` after the tests pass).
    """
    drift = []
    for name, pinned in _pins().items():
        try:
            have = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue  # platform-only dependency not needed here
        if Version(have.public) != pinned:  # the +cpu label dropped, as pip's == does
            drift.append(f"{name}: installed {have}, pinned {pinned}")
    assert not drift, "the environment differs from binder/constraints.txt: " + "; ".join(drift)


# -- plotly and kaleido agree ---------------------------------------------------------------------------


def test_dev_extra_plotly_works_with_its_kaleido():
    dev = {canonicalize_name(Requirement(d).name): Requirement(d) for d in _dev()}
    if "kaleido" not in dev:
        pytest.skip("no kaleido in the dev extra")
    if any(Version("1") in s or s.operator == ">=" and Version(s.version) >= Version("1")
           for s in dev["kaleido"].specifier):
        # kaleido 1 asks for plotly >= 6.1.1 (its own warning, checked with plotly 5.24.1 + kaleido 1.5.1:
        # "Please upgrade Plotly to version 6.1.1 or greater"), printed under every first figure
        assert "plotly" in dev, "the dev extra takes kaleido >= 1 but leaves plotly at the runtime floor 5.24"
        assert not dev["plotly"].specifier.contains("6.1.0"), f"dev plotly {dev['plotly']} admits < 6.1.1"
        assert dev["plotly"].specifier.contains(str(_pins()["plotly"]))
