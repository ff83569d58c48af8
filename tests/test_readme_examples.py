"""Every Python block of the README and of the pages under docs/ runs when pasted, and prints what the
page says.

The blocks are read from README.md and docs/*.md themselves, so an edit there is tested as written. Convention: each
```` ```python ```` block is followed by a ```` ```text ```` block (after one line of prose at most)
holding what it prints; numbers may differ, the words may not. A lesson line may come out ✘ or ?
instead of ✔ only with its reason (the check explains itself). Each block runs in a fresh
interpreter, as a reader pasting it would, with a timeout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
#: the pages a reader pastes from: the README and every page under docs/ (the generated ones included)
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?"
BLOCK = re.compile(r"```python\n(.*?)```\n((?:[^`\n][^\n]*\n|\n){0,3}?)```text\n(.*?)```", re.S)
TIMEOUT_S = 240


def page_blocks(page: Path) -> list[tuple[str, str]]:
    """(code, expected output) for every python block of one page, in order."""
    text = page.read_text()
    pairs = [(m.group(1), m.group(3)) for m in BLOCK.finditer(text)]
    n_python = text.count("```python\n")
    assert len(pairs) == n_python, (f"{page.name} has {n_python} python blocks but {len(pairs)} are followed by a "
                                    "```text block of what they print")
    return pairs


def readme_blocks() -> list[tuple[str, str, str]]:
    """(page, code, expected output) for every python block of the README and the docs pages, in order."""
    return [(page.relative_to(ROOT).as_posix(), code, out) for page in PAGES for code, out in page_blocks(page)]


def line_pattern(expected: str) -> re.Pattern:
    """A regex for one expected output line: its numbers may differ, a ✔ may be a ✘/? with its reason."""
    parts = re.split(f"({NUMBER})", expected.strip())
    body = "".join(NUMBER if i % 2 else re.escape(p) for i, p in enumerate(parts))
    if expected.startswith("\u2714"):
        body = "[\u2714\u2718?]" + body[len(re.escape("\u2714")):] + "(?: \u2014 (?:Why|Can't tell): .+)?"
    return re.compile(body)


def check_output(out: str, expected: str) -> None:
    got = [line for line in out.splitlines() if line.strip()]
    want = [line for line in expected.splitlines() if line.strip()]
    assert len(got) == len(want), f"printed {len(got)} lines, README shows {len(want)}:\n{out}"
    for g, w in zip(got, want):
        assert line_pattern(w).fullmatch(g), f"printed {g!r}\nREADME shows {w!r}"
        if g.startswith("\u2718") or g.startswith("?"):
            assert "\u2014" in g, f"a ✘ without its reason: {g!r}"


def test_readme_has_python_blocks_with_outputs():
    assert len(page_blocks(README)) >= 1
    assert len(readme_blocks()) >= 2


def test_a_python_block_without_its_output_is_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1)\n```\n\nno output block here\n")
    with pytest.raises(AssertionError, match="1 python blocks but 0"):
        page_blocks(page)


def test_line_pattern_can_fail():
    assert line_pattern("took 2.4 ms").fullmatch("took 13 ms")
    assert not line_pattern("took 2.4 ms").fullmatch("took 13 s")
    assert line_pattern("\u2714 a: 1 ms").fullmatch("\u2718 a: 3 ms \u2014 Why: busy")
    with pytest.raises(AssertionError):
        check_output("\u2718 a: 3 ms\n", "\u2714 a: 1 ms\n")


@pytest.mark.parametrize("page, index", [(p, i) for i, (p, _, _) in enumerate(readme_blocks())],
                         ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(readme_blocks())])
def test_readme_block_runs_and_prints_what_the_readme_says(page, index, tmp_path):
    _, code, expected = readme_blocks()[index]
    env = {k: v for k, v in os.environ.items() if k != "D2L_ASYNC_QUICK"}  # as pasted: default sizes
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{page} block {index} failed:\n{code}\n--- stderr ---\n{proc.stderr}"
    check_output(proc.stdout, expected)
    if "asynchronous()" in code and "the loop returned after" in proc.stdout:
        # the example's point: the frontend returned long before the products were done, and the
        # values stayed in range (no underflow to 0, no denormals)
        queued, done = map(float, re.search(rf"after ({NUMBER}) ms, .* after ({NUMBER}) ms", proc.stdout).groups())
        assert queued < 0.5 * done, f"the loop took {queued} ms of {done} ms: not asynchronous"
        mean = float(re.search(rf"= ({NUMBER})", proc.stdout).group(1))
        assert 0.01 < mean < 1.0, f"mean |x| = {mean}: out of range"
