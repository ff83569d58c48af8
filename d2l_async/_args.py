"""Argument checks for the public entry points: one message shape for every layer.

A reader who passes a wrong value gets, at the call, an error that names the argument, shows the
value and says what is accepted (``size must be an integer between 1 and 4096, got 10**12``), never
an ``AttributeError`` from three frames down or a loop that does not end.  Standard library only, so
the trace layer and everything above it can use it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["NotANumber", "TRACE_HINT", "flag", "function", "having", "instance", "integer", "mapping", "max_workers",
           "number", "path", "samples", "sequence", "span", "workers"]


class NotANumber(TypeError, ValueError):
    """A count or a measure given as something that is not a number (``"8"``, ``None``, ``1.5`` for a count).

    Both a TypeError (the type is wrong) and a ValueError, as the package's count checks raised
    before they were shared: ``except ValueError`` around a call keeps catching it.
    """


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def instance(name: str, value: Any, types: type | tuple[type, ...], *, what: str = "", hint: str = "") -> Any:
    """``value`` if it is an instance of ``types``, else a TypeError naming ``name`` and its type."""
    if isinstance(value, types):
        return value
    if not what:
        kinds = types if isinstance(types, tuple) else (types,)
        what = " or ".join(f"{t.__module__}.{t.__qualname__}".removeprefix("builtins.") for t in kinds)
    raise TypeError(f"{name} must be a {what}, got {type(value).__name__} {_shown(value)}"
                    + (f"; {hint}" if hint else ""))


def flag(name: str, value: Any) -> bool:
    """A True/False argument, or a TypeError (``"no"`` and ``0`` are not flags: say ``False``)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name}={value!r}: pass True or False")
    return value


def integer(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int within ``[minimum, maximum]`` (either may be open), else a ValueError
    (:class:`NotANumber` when it is no integer at all).

    ``bool`` is refused (``True`` is not a count) and so is a float, even an integral one: the
    reader meant something else.
    """
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise NotANumber(f"{name} must be an integer{_range(minimum, maximum)}, got {type(value).__name__} "
                        f"{_shown(value)}")
    value = int(value.__index__())
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{_range(minimum, maximum)}, got {value}")
    return value


def number(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
           above: float | None = None, finite: bool = True) -> float:
    """``value`` as a finite float within the bounds (``above``: strictly greater), else an error.

    ``finite=False`` lets ±inf and NaN through (a time that may be "never"): only the type is checked then,
    with the bounds.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise NotANumber(f"{name} must be a number{_range(minimum, maximum, above)}, got {type(value).__name__} "
                        f"{_shown(value)}")
    f = float(value)
    if not finite and math.isnan(f):
        return f
    if ((finite and not math.isfinite(f)) or (minimum is not None and f < minimum)
            or (maximum is not None and f > maximum) or (above is not None and f <= above)):
        raise ValueError(f"{name} must be a {'finite ' if finite else ''}number{_range(minimum, maximum, above)}, "
                         f"got {_shown(value)}")
    return f


def _range(minimum: float | None, maximum: float | None, above: float | None = None) -> str:
    if above is None and minimum is not None and maximum is not None:
        return f" between {minimum} and {maximum}"
    low = f"> {above}" if above is not None else (f">= {minimum}" if minimum is not None else "")
    if low and maximum is not None:
        return f" {low} and <= {maximum}"
    if maximum is not None:
        return f" <= {maximum}"
    return f" {low}" if low else ""


def max_workers() -> int:
    """The most worker threads one engine may start on this machine.

    Sixteen per CPU this process may use (``os.sched_getaffinity``), at least 64 -- far past where
    more threads on the same cores stop helping -- and never more than a quarter of the threads the
    OS lets this user start (``RLIMIT_NPROC``) or the kernel allows (``/proc/sys/kernel/threads-max``),
    so asking for too many is refused at the call instead of hanging in thread creation.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    bound = max(64, 16 * cpus)
    limits = []
    try:
        import resource  # Unix only

        soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
        if soft != resource.RLIM_INFINITY and soft > 0:
            limits.append(soft)
    except (ImportError, OSError, ValueError):
        pass
    try:
        with open("/proc/sys/kernel/threads-max") as f:
            limits.append(int(f.read()))
    except (OSError, ValueError):
        pass
    for limit in limits:
        bound = min(bound, max(1, limit // 4))
    return bound


def workers(name: str, value: Any, *, per: int = 1) -> int:
    """A worker-thread count: an integer from 1 to :func:`max_workers` (``per`` copies of it start)."""
    top = max(1, max_workers() // max(1, per))
    try:
        return integer(name, value, minimum=1, maximum=top)
    except ValueError as e:
        per_device = f" per device for {per} devices" if per > 1 else ""
        raise ValueError(f"{e} (at most {top} worker threads{per_device} on this machine: 16 per usable CPU, "
                         "at least 64, within the OS thread limits)") from None


def having(name: str, value: Any, attrs: tuple[str, ...], *, what: str) -> Any:
    """``value`` if it has every attribute in ``attrs`` (duck typing: fakes with those fields pass).

    For the lesson checks, which read a few fields of a result: a wrong object is named at the call
    (``r must be a SchedulingResult ...``) rather than failing deep inside with an AttributeError.
    """
    missing = [a for a in attrs if not hasattr(value, a)]
    if missing:
        raise TypeError(f"{name} must be {what} (with {', '.join('.' + a for a in attrs)}), got "
                        f"{type(value).__name__} {_shown(value)}")
    return value


def sequence(name: str, value: Any, *, what: str, empty: bool = True) -> tuple[Any, ...]:
    """``value``'s items as a tuple when it is a list, tuple or other iterable that is not a string."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a sequence of {what}, got {type(value).__name__} {_shown(value)}")
    items = tuple(value)
    if not empty and not items:
        raise ValueError(f"{name} must hold at least one of {what}, got an empty {type(value).__name__}")
    return items


def samples(name: str, value: Any, *, minimum: float | None = None, above: float | None = None,
            what: str = "numbers") -> list[float]:
    """Repeated measurements: one number or a non-empty sequence of finite numbers (each ``>= minimum``,
    or ``> above``); ``what`` they are, for the message (``"seconds"``).

    A string is refused as a whole (``"0.5"`` is text, and iterating it would judge its letters).
    """
    scalar = not hasattr(value, "__iter__") and hasattr(value, "__float__")  # e.g. numpy.float32
    items = [value] if scalar and not isinstance(value, bool) else value
    if isinstance(items, (str, bytes, Mapping)) or not hasattr(items, "__iter__"):
        raise NotANumber(f"{name} must be a number or a sequence of {what} (one per run), got "
                         f"{type(value).__name__} {_shown(value)}")
    out = []
    for x in items:
        if isinstance(x, bool) or not isinstance(x, (int, float)) and not hasattr(x, "__float__"):
            raise NotANumber(f"{name} must hold {what} only, got {type(x).__name__} {_shown(x)} in {_shown(value)}")
        out.append(float(x))
    if not out:
        raise ValueError(f"{name} needs at least one sample, got an empty {type(value).__name__}")
    bad = [x for x in out if not math.isfinite(x) or (minimum is not None and x < minimum)
           or (above is not None and x <= above)]
    if bad:
        bound = f"positive {what}" if above == 0 and minimum is None else f"{what}{_range(minimum, None, above)}"
        raise ValueError(f"{name} must be finite {bound}, got {_shown(bad[0])} in {_shown(value)}")
    return out


def span(name: str, value: Any) -> tuple[float, float]:
    """A ``(start, end)`` pair of numbers with ``start < end`` (either may be infinite, neither NaN)."""
    pair = tuple(value) if hasattr(value, "__iter__") and not isinstance(value, (str, bytes, Mapping)) else None
    if (pair is None or len(pair) != 2
            or any(isinstance(x, bool) or not isinstance(x, (int, float)) and not hasattr(x, "__float__") for x in pair)):
        raise TypeError(f"{name} must be a (start, end) pair of numbers, got {type(value).__name__} {_shown(value)}")
    lo, hi = float(pair[0]), float(pair[1])
    if not lo < hi:  # NaN fails this too
        raise ValueError(f"{name}={_shown(value)}: the start must come before the end")
    return lo, hi


def path(name: str, value: Any) -> Path:
    """A file or folder path: a non-empty ``str`` or ``os.PathLike`` (``pathlib.Path``), as a ``Path``."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a file path or folder path (str or pathlib.Path), got {type(value).__name__} "
                        f"{_shown(value)}")
    if not os.fspath(value):
        raise ValueError(f"{name} must be a file path or folder path (str or pathlib.Path), got the empty string "
                         f"{value!r}")
    return Path(value)


def function(name: str, value: Any, *, what: str = "a function") -> Any:
    """``value`` if it can be called, else a TypeError naming ``name`` (``what``: what it is called with)."""
    if not callable(value):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__} {_shown(value)}")
    return value


def mapping(name: str, value: Any, *, what: str) -> Mapping[Any, Any]:
    """``value`` if it is a mapping (a ``dict``), else a TypeError naming ``name`` and ``what`` it maps."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a dict of {what}, got {type(value).__name__} {_shown(value)}")
    return value


#: Where a reader gets a Trace, for the messages that refuse something else.
TRACE_HINT = "get one from eng.trace(), d2l_async.data.load_sample(name) or d2l_async.trace.read_chrome_trace(path)"
