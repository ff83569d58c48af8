"""Settings read from the environment, in one place.

Notebooks never parse ``os.environ`` themselves: they call :func:`quick_mode` and friends, so the
quick mode used by ``make test`` and the headless report shrinks every workload the same way.
"""

from __future__ import annotations

import os

from ._args import number

__all__ = ["REPO_URL", "REPO_SLUG", "quick_mode", "scale", "ENGINE_KINDS", "engine_kind", "in_colab"]

#: The GitHub repository the Colab/Binder badges and the Colab install cell point to.
#: Re-point the badges by changing this (and running ``python scripts/badges.py``).
REPO_SLUG = "d2l-async/d2l-async"
REPO_URL = f"https://github.com/{REPO_SLUG}"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def quick_mode() -> bool:
    """True when ``D2L_ASYNC_QUICK`` asks for small workloads (tests, CI, the quick report).

    Returns:
        ``True`` for 1/true/yes/on, ``False`` for 0/false/no/off or an unset (or empty) variable.

    Raises:
        ValueError: the variable holds something other than a yes/no value.
    """
    raw = os.environ.get("D2L_ASYNC_QUICK", "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"D2L_ASYNC_QUICK={raw!r}: use 1/0, true/false, yes/no or on/off")


def scale(full: int, quick: int) -> int:
    """The workload size to use: ``quick`` in quick mode, ``full`` otherwise.

    Returns:
        ``quick`` when :func:`quick_mode` is on, else ``full``.

    Raises:
        ValueError: ``full`` or ``quick`` is below 1.
    """
    number("full", full, minimum=1)
    number("quick", quick, minimum=1)
    if full < 1 or quick < 1:
        raise ValueError(f"workload sizes must be positive, got full={full}, quick={quick}")
    return quick if quick_mode() else full


#: The engines ``D2L_ASYNC_ENGINE`` may name (``d2l_async.engine.make_engine`` makes them).
ENGINE_KINDS = ("threaded", "naive")


def engine_kind() -> str:
    """The engine every experiment and dashboard runs on (``d2l_async.engine.make_engine``).

    Returns:
        ``"threaded"`` unless ``D2L_ASYNC_ENGINE=naive`` (MXNet's NaiveEngine: every op at push time).

    Raises:
        ValueError: ``D2L_ASYNC_ENGINE`` is set to something else.
    """
    raw = os.environ.get("D2L_ASYNC_ENGINE", "threaded").strip().lower() or "threaded"
    if raw not in ENGINE_KINDS:
        raise ValueError(f"D2L_ASYNC_ENGINE={raw!r}: use 'threaded' or 'naive' (or leave it unset: 'threaded')")
    return raw


def in_colab() -> bool:
    """True inside Google Colab (its module is imported by the Colab runtime).

    Returns:
        ``True`` when ``google.colab`` is already imported (the Colab runtime imports it), else ``False``.
    """
    import sys

    return "google.colab" in sys.modules
