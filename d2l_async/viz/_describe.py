"""Every figure's text alternative: its title and the one fact it shows, computed from its data.

A screen reader, or a reader of the static site whose browser draws no plot, gets nothing from an
SVG of bars.  Each ``plot_*`` function therefore ends with :func:`describe`, which stores the
fact its data step measured (``"the frontend waited 41.0 ms in 1 wait, longest mean =
x.mean().item() — line 7"``) in ``fig.layout.meta``; :func:`alt_text` joins it to the figure's
current title.  The notebooks print it with ``viz.alt_text(fig)``; the site writes it as the
figure's ``aria-label`` (``site/setup_cell.py``).
"""

from __future__ import annotations

import html
import re
from typing import Any

import plotly.graph_objects as go

from . import style
from .._args import instance

__all__ = ["alt_text", "describe", "format_time"]

_TAG = re.compile(r"<[^>]+>")


def format_time(seconds: float) -> str:
    """A time in the unit that suits it (``"41.0 ms"``, ``"9.67 µs"``, ``"1.16 s"``)."""
    unit, factor = style.time_unit(seconds)
    return f"{seconds * factor:.3g} {unit}"


def _plain(text: Any) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", str(text or ""))).split())


def _title(layout: Any) -> str:
    """The title's first line, as plain text (its ``<br><sup>`` details are the device, not the fact)."""
    title = layout.get("title") if isinstance(layout, dict) else layout.title
    if isinstance(title, dict):
        text = title.get("text")
    elif isinstance(title, str) or title is None:
        text = title
    else:
        text = title.text
    return _plain(re.split(r"<br\s*/?>", str(text or ""))[0])


def describe(fig: go.Figure, fact: str) -> go.Figure:
    """Store ``fact`` (what the figure's data shows, in one sentence) and the text alternative it
    makes with the title in ``fig.layout.meta``; returns ``fig``."""
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    fact = _plain(fact)
    fig.update_layout(meta={**meta, "fact": fact, "alt": _join(_title(fig.layout), fact)})
    return fig


def _join(title: str, fact: str) -> str:
    if not title:
        return fact
    if not fact:
        return title
    return f"{title.rstrip('.')}. {fact[0].upper()}{fact[1:]}"


def alt_text(fig: Any) -> str:
    """The text alternative of a figure of this package: its title, then the fact it shows.

    Args:
        fig: a ``go.Figure``/``go.FigureWidget`` or its JSON (``fig.to_plotly_json()``, a notebook
            output's ``application/vnd.plotly.v1+json``).

    Returns:
        One or two plain sentences; the title alone for a figure made elsewhere (no fact stored).
    """
    instance("fig", fig, (go.Figure, dict), what="plotly go.Figure, go.FigureWidget or its JSON dict")
    layout = fig.get("layout", {}) if isinstance(fig, dict) else fig.layout
    meta = layout.get("meta") if isinstance(layout, dict) else layout.meta
    fact = meta.get("fact", "") if isinstance(meta, dict) else ""
    return _join(_title(layout), fact)
