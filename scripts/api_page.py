"""Write docs/api.md, the API reference, from the package's docstrings.

Every public name — each name in the ``__all__`` of ``d2l_async`` and of its sub-packages — with its
kind, its signature, the first paragraph of its docstring and what it returns (the docstring's
``Returns:`` section, else its return annotation; a class returns an instance of itself). Classes
list their public methods and properties the same way. ``tests/test_docs_generated.py`` fails when
the committed page differs from what this script writes now, so the page follows the code.

Run: ``python scripts/api_page.py`` (or ``make docs``); ``--check`` exits 1 if the page is stale.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "api.md"
sys.path.insert(0, str(ROOT))

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Return|Yields|Raises|Attributes|Example|Examples|Note|"
                     r"Notes|See also|Usage)\s*:\s*$", re.I)


#: Public modules inside a sub-package, listed after it (the engine's interface for runtimes built on it; the
#: engine in one file and its exercise).
NESTED = {"d2l_async.engine": ("d2l_async.engine.core", "d2l_async.engine.minimal", "d2l_async.engine.exercise")}


def package_modules() -> list[str]:
    """``d2l_async`` and its sub-packages and modules, in the order ``d2l_async`` lists them."""
    import d2l_async

    names = ["d2l_async", *(f"d2l_async.{m}" for m in sorted(d2l_async._SUBMODULES))]
    return [n for name in names for n in (name, *NESTED.get(name, ()))]


def clean(text: str) -> str:
    """One line of Markdown from docstring text: reST roles and double backticks made plain code."""
    text = re.sub(r":(?:func|class|meth|attr|mod|data|obj|exc|py:\w+):`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    return " ".join(text.split())


def summary(doc: str | None) -> str:
    """The docstring's first paragraph (up to its first section heading)."""
    if not doc:
        return "*(no docstring)*"
    lines = []
    for line in inspect.cleandoc(doc).splitlines():
        if not line.strip() or SECTION.match(line):
            if lines:
                break
            continue
        lines.append(line)
    return clean(" ".join(lines))


def returns_section(doc: str | None) -> str:
    """The text of a Google-style ``Returns:`` (or ``Yields:``) section, as one line."""
    if not doc:
        return ""
    lines = inspect.cleandoc(doc).splitlines()
    for i, line in enumerate(lines):
        m = SECTION.match(line)
        if m and m.group(1).lower() in ("returns", "return", "yields"):
            body = []
            for nxt in lines[i + 1:]:
                if SECTION.match(nxt) or (body and not nxt.strip()):
                    break
                if nxt.strip():
                    body.append(nxt.strip())
            return clean(" ".join(body))
    m = re.search(r"\bReturns? (.+?)(?:\.\s|\.$)", inspect.cleandoc(doc).replace("\n", " "))
    return clean(m.group(1)) if m and m.group(0).startswith("Return") else ""


def signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def annotation(ann: Any) -> str:
    """An annotation as written (the package uses ``from __future__ import annotations``: strings)."""
    if ann is inspect.Parameter.empty:
        return ""
    text = ann if isinstance(ann, str) else getattr(ann, "__name__", None) or str(ann)
    return text.strip("'\"").replace("typing.", "")


def default_text(value: Any) -> str:
    text = value_text(value)
    return text if len(text) <= 60 else text[:57] + "..."


def sig_text(name: str, obj: Any, *, drop_self: bool = False, with_return: bool = True) -> str:
    """``name(a: int, *, b: str = 'x') -> T``: annotations as written, long defaults shortened."""
    s = signature(obj)
    if s is None:
        return f"{name}(...)"
    params = list(s.parameters.values())
    if drop_self and params and params[0].name in ("self", "cls"):
        params = params[1:]
    parts, star = [], False
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        star = star or p.kind is p.VAR_POSITIONAL
        text = prefix + p.name
        ann = annotation(p.annotation)
        if ann:
            text += f": {ann}"
        if p.default is not p.empty:
            text += f" = {default_text(p.default)}" if ann else f"={default_text(p.default)}"
        parts.append(text)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind is not p.POSITIONAL_ONLY):
            parts.append("/")
    ret = annotation(s.return_annotation) if with_return else ""
    return f"{name}({', '.join(parts)})" + (f" -> {ret}" if ret else "")


def returns_of(obj: Any) -> str:
    doc_returns = returns_section(inspect.getdoc(obj))
    s = signature(obj)
    ann = "" if s is None else annotation(s.return_annotation)
    if doc_returns and ann:
        return f"`{ann}` — {doc_returns}"
    if doc_returns:
        return doc_returns
    if ann:
        return f"`{ann}`" + ("" if ann != "None" else " (nothing)")
    return "*not documented*"


def kind_of(obj: Any) -> str:
    if inspect.isclass(obj):
        if issubclass(obj, enum.Enum):
            return "enum"
        if issubclass(obj, BaseException):
            return "exception"
        if dataclasses.is_dataclass(obj):
            return "dataclass"
        return "class"
    if inspect.ismodule(obj):
        return "module"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "function"
    if callable(obj):
        return "callable"
    return "constant"


def value_text(obj: Any) -> str:
    """A constant's value; sets in sorted order (their own order changes with the hash seed)."""
    if isinstance(obj, (set, frozenset)):
        body = ", ".join(sorted(repr(x) for x in obj))
        text = f"{type(obj).__name__}({{{body}}})"
    else:
        text = ADDRESS.sub("", repr(obj))
    return text if len(text) <= 120 else text[:117] + "..."


def members(cls: type) -> list[tuple[str, Any, str]]:
    """(name, object, kind) of the public methods and properties a class defines itself."""
    out = []
    for name, value in cls.__dict__.items():
        if name.startswith("_"):
            continue
        if isinstance(value, property) or type(value).__name__ == "cached_property":
            out.append((name, value, "property"))
        elif isinstance(value, (staticmethod, classmethod)):
            out.append((name, value.__func__, type(value).__name__))
        elif inspect.isfunction(value):
            out.append((name, value, "method"))
    return out


def entry(module: str, name: str, obj: Any) -> list[str]:
    kind = kind_of(obj)
    lines = [f"### `{name}`", ""]
    if kind == "constant":
        lines += [f"*constant* `{value_text(obj)}`", ""]
        return lines
    if kind == "module":
        lines += [f"*module* — {summary(obj.__doc__)}", ""]
        return lines
    if kind == "enum":
        values = ", ".join(f"`{m.name}`" for m in obj)
        lines += [f"*enum* — {summary(obj.__doc__)}", "", f"Members: {values}.", ""]
        return lines
    shown = sig_text(name, obj, with_return=not inspect.isclass(obj))
    lines += ["```text", shown, "```", "", f"*{kind}* — {summary(inspect.getdoc(obj))}", ""]
    if inspect.isclass(obj):
        manager = " (a context manager: `with`)" if hasattr(obj, "__enter__") else ""
        lines += [f"**Returns:** a new `{name}` object{manager}.", ""]
        for mname, mobj, mkind in members(obj):
            if mkind == "property":
                fget = getattr(mobj, "fget", None) or getattr(mobj, "func", None)
                lines.append(f"- `.{mname}` (property) — {summary(inspect.getdoc(fget) if fget else None)}")
            else:
                lines.append(f"- `.{sig_text(mname, mobj, drop_self=mkind != 'staticmethod')}` — "
                             f"{summary(inspect.getdoc(mobj))} **Returns:** {returns_of(mobj)}")
        if members(obj):
            lines.append("")
    else:
        lines += [f"**Returns:** {returns_of(obj)}", ""]
    return lines


def render() -> str:
    lines = [
        "# API reference",
        "",
        "<!-- Generated by scripts/api_page.py from the package's docstrings: do not edit by hand. -->",
        "",
        "Every public name of `d2l_async` and of its sub-packages (their `__all__`), with its signature, the "
        "first paragraph of its docstring and what it returns. Generated by `python scripts/api_page.py` "
        "(`make docs`); a test fails when this page is older than the code. How the parts fit together: "
        "[How it works](how-it-works.md).",
        "",
    ]
    mods = package_modules()
    lines += ["Modules: " + ", ".join(f"`{m}`" for m in mods) + ".", ""]
    for modname in mods:
        mod = importlib.import_module(modname)
        names = list(getattr(mod, "__all__", []))
        lines += [f"## `{modname}`", "", summary(mod.__doc__), ""]
        if not names:
            lines += ["*(no public names)*", ""]
            continue
        for name in names:
            lines += entry(modname, name, getattr(mod, name))
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT, help="where to write the page (default docs/api.md)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when the page differs")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python scripts/api_page.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
