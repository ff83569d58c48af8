"""Controls: the sliders, dropdowns and toggles a reader moves to change a workload.

Each helper returns a plain ipywidgets control whose ``.value`` is passed to the experiment
under the keyword the dashboard gives it.  Sliders use ``continuous_update=False``: dragging a
slider launches one run when it is released, not ten on the way.

The dropdowns that teach something offer the experiments' own lists (the blockers they measure, the
expressions the dependency graph accepts) and the backends this machine actually has (``"cuda"``
only when ``torch.cuda.is_available()``; a CPU is never offered as a GPU).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import ipywidgets as widgets
from traitlets import TraitError, validate

from .._args import instance, integer, number

__all__ = [
    "int_slider",
    "float_slider",
    "log_slider",
    "dropdown",
    "toggle",
    "backends",
    "backend_dropdown",
    "blocker_dropdown",
    "expression_dropdown",
]

_LAYOUT = {"width": "420px"}
_STYLE = {"description_width": "140px"}


class _NamesChoices:
    """Mixin for selection widgets: a value that is not an option is answered with the options.

    traitlets' own message is "Invalid selection: value not found"; a reader who typed
    ``dash.controls["blocker"].value = "item"`` should learn what the choices are.
    """

    @validate("value")
    def _validate_value(self, proposal: Any) -> Any:
        try:
            return super()._validate_value(proposal)  # type: ignore[misc]
        except TraitError:
            allowed = ", ".join(repr(v) for v in self._options_values)  # type: ignore[attr-defined]
            raise TraitError(f"{self.description}: {proposal.value!r} is not one of the allowed values: "  # type: ignore[attr-defined]
                             f"{allowed}") from None


class _Dropdown(_NamesChoices, widgets.Dropdown):
    """A Dropdown whose invalid values are answered with the allowed ones."""


class _SelectionSlider(_NamesChoices, widgets.SelectionSlider):
    """A SelectionSlider whose invalid values are answered with the allowed ones."""


def _check_range(name: str, value: float, min: float, max: float) -> None:
    instance("description", name, str, what="str (the control's label)")
    check = integer if all(isinstance(v, int) for v in (value, min, max)) else number
    for arg, v in (("value", value), ("min", min), ("max", max)):
        check(f"{name}: {arg}", v)
    if not min <= max:
        raise ValueError(f"{name}: min={min!r} must not exceed max={max!r}")
    if not min <= value <= max:
        raise ValueError(f"{name}: value={value!r} must lie in [min={min!r}, max={max!r}]")


def int_slider(description: str, value: int, min: int, max: int, step: int = 1) -> widgets.IntSlider:
    """An integer slider that reports its value on release.

    Returns:
        An ``ipywidgets.IntSlider`` with ``continuous_update=False``.
    """
    _check_range(description, value, min, max)
    for arg, v in (("value", value), ("min", min), ("max", max)):
        integer(f"{description}: {arg}", v)
    integer(f"{description}: step", step, minimum=1)
    return widgets.IntSlider(
        value=value, min=min, max=max, step=step, description=description,
        continuous_update=False, layout=_LAYOUT, style=_STYLE,
    )


def float_slider(
    description: str, value: float, min: float, max: float, step: float = 0.1, readout_format: str = ".2f"
) -> widgets.FloatSlider:
    """A float slider that reports its value on release.

    Returns:
        An ``ipywidgets.FloatSlider`` with ``continuous_update=False``.
    """
    _check_range(description, value, min, max)
    number(f"{description}: step", step, above=0)
    instance("readout_format", readout_format, str, what="str such as '.2f'")
    try:
        return widgets.FloatSlider(
            value=value, min=min, max=max, step=step, description=description, readout_format=readout_format,
            continuous_update=False, layout=_LAYOUT, style=_STYLE,
        )
    except TraitError as e:  # a readout_format d3-format does not read (ipywidgets checks it)
        raise ValueError(f"{description}: {e}") from None


def log_slider(
    description: str, value: int, min: int, max: int, base: int = 2
) -> widgets.SelectionSlider:
    """An integer slider over the powers of ``base`` from ``min`` to ``max`` (sizes, op counts).

    ``min``, ``max`` and ``value`` must be powers of ``base``; the value is an ``int``.

    Returns:
        A ``SelectionSlider`` whose options are the powers of ``base`` from ``min`` to ``max`` (labelled with
        thousands separators), set to ``value``, with ``continuous_update=False``.
    """
    integer(f"{description}: base", base, minimum=2)
    _check_range(description, value, min, max)
    for name, v in (("min", min), ("max", max), ("value", value)):
        exp = round(math.log(v, base)) if v > 0 else None
        if exp is None or base**exp != v:
            raise ValueError(f"{description}: {name}={v!r} is not a power of {base}")
    lo, hi = round(math.log(min, base)), round(math.log(max, base))
    options = [(f"{base**e:,}", base**e) for e in range(lo, hi + 1)]
    return _SelectionSlider(
        options=options, value=value, description=description,
        continuous_update=False, layout=_LAYOUT, style=_STYLE,
    )


def dropdown(description: str, options: Sequence[Any], value: Any = None) -> widgets.Dropdown:
    """A dropdown; ``options`` are values or ``(label, value)`` pairs; ``value`` defaults to the first.

    Returns:
        A ``Dropdown`` labelled ``description``; an invalid value later set on it is answered with the allowed ones.
    """
    instance("description", description, str, what="str (the control's label)")
    if isinstance(options, (str, bytes)) or not hasattr(options, "__iter__"):
        raise TypeError(f"{description}: options must be a sequence of values or (label, value) pairs, "
                        f"got {type(options).__name__}")
    options = list(options)
    if not options:
        raise ValueError(f"{description}: options is empty; a dropdown needs at least one option")
    values = [o[1] if isinstance(o, tuple) else o for o in options]
    if value is None:
        value = values[0]
    elif value not in values:
        raise ValueError(f"{description}: value={value!r} is not one of {values}")
    return _Dropdown(options=options, value=value, description=description, layout=_LAYOUT, style=_STYLE)


def toggle(description: str, value: bool = False) -> widgets.Checkbox:
    """An on/off control.

    Returns:
        An ``ipywidgets.Checkbox`` labelled ``description``, set to ``bool(value)``.
    """
    instance("description", description, str, what="str (the control's label)")
    return widgets.Checkbox(value=bool(value), description=description, indent=False)


def backends(*, min_gpus: int = 1) -> tuple[str, ...]:
    """The backends this machine can run: ``"engine"``, plus ``"cuda"`` with ``min_gpus`` usable GPUs.

    Returns:
        ``("engine", "cuda")`` when at least ``max(min_gpus, 1)`` CUDA devices are usable, else ``("engine",)``.
    """
    min_gpus = integer("min_gpus", min_gpus, minimum=0)
    try:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # no torch, or a broken CUDA install: the engine still works
        gpus = 0
    return ("engine", "cuda") if gpus >= max(min_gpus, 1) else ("engine",)


def backend_dropdown(value: str = "engine", *, min_gpus: int = 1) -> widgets.Dropdown:
    """Where the work runs: the teaching engine (virtual devices) or, with enough GPUs, CUDA.

    Returns:
        A ``Dropdown`` labelled "backend" offering ``"engine"`` and, when :func:`backends` allows it, ``"cuda"``; an
        invalid value is answered with the allowed ones.
    """
    min_gpus = integer("min_gpus", min_gpus, minimum=0)
    cuda = [("cuda (this machine's GPU)", "cuda")] if "cuda" in backends(min_gpus=min_gpus) else []
    return dropdown("backend", [("engine (virtual devices)", "engine"), *cuda], value)


def blocker_dropdown(value: str | None = None, options: Sequence[str] | None = None) -> widgets.Dropdown:
    """Which call makes the frontend wait (default: the blockers the experiments measure).

    Returns:
        A ``Dropdown`` labelled "blocker" over ``options`` (default: the experiments' ``BLOCKERS``), set to
        ``value`` or the first.
    """
    if options is None:
        from d2l_async.experiments import BLOCKERS

        options = BLOCKERS
    return dropdown("blocker", options, value)


def expression_dropdown(value: str | None = None, options: Sequence[str] | None = None) -> widgets.Dropdown:
    """Which expression the dependency graph is built for (default: the experiments' list,
    the book's ``x * y + 2`` first).

    Returns:
        A ``Dropdown`` labelled "expression" over ``options`` (default: the experiments' ``EXPRESSIONS``), set to
        ``value`` or the first.
    """
    if options is None:
        from d2l_async.experiments import EXPRESSIONS

        options = EXPRESSIONS
    return dropdown("expression", options, value)
