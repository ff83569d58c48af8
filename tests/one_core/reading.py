"""How long a notebook takes to read, what it teaches, and how much of its code is plumbing.

One sitting is the chapter's limit: every notebook reads in at most :data:`MAX_MINUTES` with at most
:data:`MAX_CONCEPTS` new concepts.  The measures, each a pure function of the notebook (its source,
and its outputs once executed):

* **reading minutes** -- markdown and printed words at :data:`WORDS_PER_MINUTE`, code lines at
  :data:`CODE_LINES_PER_MINUTE`.  Markdown words leave out URLs, HTML comments and the badges line;
  printed words are what an executed run shows as text: stdout, each check's line, the text of a
  result's table (plotly figures and widgets are drawings, not text).  Code lines are non-blank
  lines, comments included (a reader reads them).
* **concepts** -- the ``**New concepts:** a · b · c`` line of the notebook's first markdown cell; every
  concept is defined once in notebook 00's glossary (``* **a** -- ...`` items under its "Glossary"
  heading) and introduced by exactly one notebook.
* **plumbing share** -- the code lines that print, format or unpack results rather than run the book's
  code: a statement that calls ``print``/``display``/``Markdown``/``pd.DataFrame``/``round`` or holds an
  f-string or ``.format(``, an assignment whose value only reads attributes or items (``m = r.model``,
  ``full, narrow = r.barrier_names``), and a ``for`` whose body is all plumbing.
* **check lines and words** -- the lesson checks an executed run displays (their metadata).
* **API calls** -- every ``module.name`` a cell reads from a ``d2l_async`` module must be in a pinned
  public module's ``__all__`` (``tests/test_public_names.py``).

``scripts/reading_time.py`` prints the table; the tests hold the limits.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

__all__ = ["WORDS_PER_MINUTE", "CODE_LINES_PER_MINUTE", "MAX_MINUTES", "MAX_CONCEPTS", "MAX_PLUMBING",
           "NotebookStats", "stats", "concepts", "glossary", "plumbing_lines", "api_calls", "markdown_words"]

WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 10
MAX_MINUTES = 20.0
MAX_CONCEPTS = 10
MAX_PLUMBING = 0.20

ROOT = Path(__file__).resolve().parents[2]
_URL = re.compile(r"\(https?://[^)\s]*\)|https?://\S+")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_BADGES = re.compile(r"^\s*\[!\[.*$", re.MULTILINE)
_CONCEPTS = re.compile(r"^\*\*New concepts:\*\*\s*(.+(?:\n(?!\s*\n).+)*)", re.MULTILINE)
_ENTRY = re.compile(r"^(?:[*-]\s+)?\*\*([^*]+)\*\*\s+[—–-]+\s+\S", re.MULTILINE)
_PLUMBING_CALLS = {"print", "display", "Markdown", "DataFrame", "round", "HTML"}


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def markdown_words(text: str) -> int:
    """Words a reader reads in a markdown text (URLs, HTML comments, the badges line and bare punctuation such
    as list markers and table rules left out)."""
    text = _BADGES.sub("", _COMMENT.sub("", text))
    return sum(1 for w in _URL.sub("", text).split() if any(ch.isalnum() for ch in w))  # not "*", "|", "---"


def _text(out: dict[str, Any]) -> str:
    data = out.get("text") if out.get("output_type") == "stream" else (out.get("data") or {}).get("text/plain", "")
    return "".join(data) if isinstance(data, list) else str(data or "")


def printed_words(nb: dict[str, Any]) -> int:
    """Words an executed notebook shows as text: stdout, check lines, results' tables."""
    n = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = out.get("data") or {}
            if out.get("output_type") == "stream" and out.get("name") != "stdout":
                continue  # stderr: warnings, not the chapter's text
            if "application/vnd.plotly.v1+json" in data or "application/vnd.jupyter.widget-view+json" in data:
                continue  # a figure or a widget: drawn, not read as words
            n += sum(1 for w in _text(out).split() if any(ch.isalnum() for ch in w))
    return n


def _calls_plumbing(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.JoinedStr):
            return True
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in _PLUMBING_CALLS or name == "format":
                return True
    return False


def _reads_only(node: ast.AST) -> bool:
    """An expression that only reads names, attributes, items and constants (unpacking a result)."""
    allowed = (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Tuple, ast.Load, ast.UnaryOp, ast.USub,
               ast.Slice)
    nodes = list(ast.walk(node))
    return all(isinstance(sub, allowed) for sub in nodes) and any(isinstance(sub, (ast.Attribute, ast.Subscript))
                                                                 for sub in nodes)


def _is_plumbing(stmt: ast.stmt) -> bool:
    if isinstance(stmt, (ast.For, ast.While)):
        return bool(stmt.body) and all(_is_plumbing(s) for s in stmt.body)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        value = stmt.value
        return value is not None and (_calls_plumbing(value) or _reads_only(value))
    if isinstance(stmt, ast.Expr):
        return _calls_plumbing(stmt.value)
    return False


def _code(cell_source: str) -> str:
    """A cell's code as Python: IPython magics and shell lines commented out."""
    return "\n".join(line[: len(line) - len(line.lstrip())] + "pass  # " + line.lstrip()
                     if line.lstrip().startswith(("%", "!")) else line for line in cell_source.splitlines())


def plumbing_lines(source: str) -> tuple[int, int]:
    """``(plumbing, code)`` non-blank lines of one code cell (a cell Python cannot parse counts as code)."""
    lines = [i for i, line in enumerate(source.splitlines(), 1) if line.strip()]
    try:
        tree = ast.parse(_code(source))
    except SyntaxError:
        return 0, len(lines)
    marked: set[int] = set()

    def visit(body: Iterable[ast.stmt]) -> None:
        for stmt in body:
            if _is_plumbing(stmt):
                marked.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(stmt, field, None)
                    if isinstance(inner, list):
                        visit([s for s in inner if isinstance(s, ast.stmt)] +
                              [b for h in inner if isinstance(h, ast.ExceptHandler) for b in h.body])

    visit(tree.body)
    return len(marked & set(lines)), len(lines)


def concepts(nb: dict[str, Any]) -> tuple[str, ...]:
    """The notebook's new concepts, from the ``**New concepts:**`` line of its first markdown cell."""
    first = next((c for c in nb.get("cells", []) if c.get("cell_type") == "markdown"), None)
    m = _CONCEPTS.search(_source(first)) if first else None
    return tuple(" ".join(x.split()).lower() for x in re.split(r"\s*[·;]\s*", m.group(1)) if x.strip()) if m else ()


def glossary(nb: dict[str, Any]) -> dict[str, str]:
    """Notebook 00's glossary: term -> definition line, from the cell under its "Glossary" heading."""
    for cell in nb.get("cells", []):
        text = _source(cell)
        if cell.get("cell_type") == "markdown" and re.search(r"^#+\s*Glossary", text, re.MULTILINE):
            return {m.group(1).strip().lower(): line for line in text.splitlines() if (m := _ENTRY.match(line))}
    return {}


@dataclass(frozen=True)
class NotebookStats:
    """What one notebook asks of a reader (see the module docstring)."""

    name: str
    markdown_words: int
    printed_words: int
    code_lines: int
    plumbing_lines: int
    concepts: tuple[str, ...]
    check_lines: int
    check_words: int
    executed: bool

    @property
    def minutes(self) -> float:
        return (self.markdown_words + self.printed_words) / WORDS_PER_MINUTE + self.code_lines / CODE_LINES_PER_MINUTE

    @property
    def plumbing_share(self) -> float:
        return self.plumbing_lines / self.code_lines if self.code_lines else 0.0


def stats(path: str | Path, nb: dict[str, Any] | None = None) -> NotebookStats:
    """The :class:`NotebookStats` of the notebook at ``path`` (or of ``nb``, an executed copy of it)."""
    from d2l_async import lesson

    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8")) if nb is None else nb
    md = sum(markdown_words(_source(c)) for c in nb["cells"] if c["cell_type"] == "markdown")
    plumb = code = 0
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            p, n = plumbing_lines(_source(c))
            plumb, code = plumb + p, code + n
    checks = [x for c in nb["cells"] if c["cell_type"] == "code"
              for x in lesson.checks_in_outputs(c.get("outputs", []), printed=False)]
    executed = any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")
    return NotebookStats(path.stem, md, printed_words(nb), code, plumb, concepts(nb), len(checks),
                         sum(x.words for x in checks), executed)


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the d2l_async module (or module.attribute) it is bound to by the imports."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "d2l_async":
                    out[a.asname or a.name.split(".")[0]] = a.name if a.asname else "d2l_async"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "d2l_async":
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _pinned() -> dict[str, set[str]]:
    from tests.test_public_names import SURFACE

    return {m: set(names) for m, names in SURFACE.items()}


def _resolve(dotted: str, pinned: dict[str, set[str]]) -> str | None:
    """``None`` when ``dotted`` (``d2l_async.x.y``) is a pinned module or a name of one, else why not."""
    if dotted in pinned:
        return None
    module, _, name = dotted.rpartition(".")
    if module in pinned:
        if name in pinned[module]:
            return None
        try:  # a pinned module's public submodule (d2l_async.viz -> d2l_async.viz.style) is not a call
            importlib.import_module(dotted)
        except ImportError:
            return f"{dotted}: {name!r} is not in {module}.__all__"
        return f"{dotted}: a module outside the pinned surface"
    return f"{dotted}: {module} is not a pinned public module"


def api_calls(nb: dict[str, Any]) -> list[str]:
    """Every ``d2l_async`` name the notebook's cells read that is not pinned public API (``[]``: none)."""
    pinned = _pinned()
    code = "\n".join(_code(_source(c)) for c in nb["cells"] if c["cell_type"] == "code")
    tree = ast.parse(code)
    aliases = _aliases(tree)
    problems: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "d2l_async":
            for a in node.names:
                if (why := _resolve(f"{node.module}.{a.name}", pinned)):
                    problems.add(why)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            base = aliases[node.value.id]
            if base in pinned or base.rpartition(".")[0] not in pinned:  # a module: check the attribute read
                if (why := _resolve(f"{base}.{node.attr}", pinned)):
                    problems.add(why)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id in aliases:
            base = f"{aliases[node.value.value.id]}.{node.value.attr}"
            if base not in pinned and (why := _resolve(base, pinned)):
                problems.add(why)
    return sorted(problems)
