"""Every public function's docstring says what it returns.

Public: a function named in the ``__all__`` of ``d2l_async``, of each of its sub-packages, or of the
engine's declared interface ``d2l_async.engine.core`` (the modules ``docs/api.md`` lists). A function
annotated ``-> None`` returns nothing to describe; every other one has a Google-style ``Returns:``
section, or ``Yields:`` for a generator or a context manager.
"""

from __future__ import annotations

import importlib
import inspect
import re

import d2l_async

SECTION = re.compile(r"^\s*(Returns|Yields):\s*$", re.M)


def public_modules() -> list[str]:
    return ["d2l_async", *(f"d2l_async.{m}" for m in sorted(d2l_async._SUBMODULES)), "d2l_async.engine.core"]


def public_functions() -> list[tuple[str, object]]:
    """``(module.name, function)`` for each public function, once (the first module that exports it)."""
    seen: set[int] = set()
    out = []
    for module in public_modules():
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isfunction(obj) and id(obj) not in seen:
                seen.add(id(obj))
                out.append((f"{module}.{name}", obj))
    return out


def returns_nothing(fn: object) -> bool:
    annotation = inspect.signature(fn).return_annotation
    return annotation is None or annotation == "None"


def test_every_public_function_that_returns_something_documents_it():
    functions = public_functions()
    assert len(functions) > 100  # the enumeration found the public surface, not an empty list
    missing = [name for name, fn in functions
               if not returns_nothing(fn) and not SECTION.search(inspect.getdoc(fn) or "")]
    assert missing == [], f"add a Returns: (or Yields:) section to: {', '.join(missing)}"


def test_the_section_check_sees_a_missing_section():
    def documented() -> int:
        """One.

        Returns:
            1.
        """
        return 1

    def undocumented() -> int:
        """One; the word Returns: inside a sentence is not a section."""
        return 1

    assert SECTION.search(inspect.getdoc(documented))
    assert not SECTION.search(inspect.getdoc(undocumented))
    def nothing() -> None:
        """Does something."""

    assert returns_nothing(nothing)
    assert not returns_nothing(documented)
