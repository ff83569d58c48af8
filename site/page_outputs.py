"""What a page shows in place of what the site cannot run, shared by both ways the site gets its outputs.

A page's outputs come from Jupyter Book executing the notebook here (the hidden first cell,
``site/setup_cell.py``, installs these as the kernel's renderers, and the footer, ``site/machine_cell.py``,
prints :func:`machine_line`), or from the run ``make test`` kept in ``build/executed`` (``site/build_site.py``
rewrites its stored outputs with the same functions).  One module, so the two cannot drift:

- :func:`figure_html`: a plotly figure as HTML for a page that loads plotly.js once (the site's <head>), inside
  a figure element named by its text alternative (``d2l_async.viz.alt_text``) and numbered in the page's
  order, with that text as its caption ("Figure 3. ..."), which a reader without the plot reads instead;
- :data:`NEEDS_KERNEL`: a dashboard (any ipywidget) needs a running kernel; the page says so where the
  notebook shows one;
- :func:`machine_line`: the page's last line, where and when it ran.

Imported by the kernel (staged beside the notebooks) and by the build; nothing here imports ipywidgets.
"""

from __future__ import annotations

import html

NEEDS_KERNEL = ('<div class="admonition note d2l-needs-kernel"><p class="admonition-title">Needs a kernel</p>'
                '<p>This dashboard runs experiments when its controls move: it needs a running Python kernel. '
                'Open this notebook with the launch button at the top of the page (Binder, Colab or a '
                'JupyterHub) to use it; the figures above were drawn when this page was built.</p></div>')
NEEDS_KERNEL_TEXT = "(a dashboard: needs a running kernel)"


def figure_html(fig_dict: dict, number: int) -> str:
    """Figure ``number`` of a page: plotly's HTML (no plotly.js) in a captioned figure named by its alt text."""
    import plotly.io as pio

    from d2l_async.viz import alt_text

    plot = pio.to_html(fig_dict, include_plotlyjs=False, full_html=False, validate=False, auto_play=False,
                       config={"responsive": True})
    alt = html.escape(alt_text(fig_dict) or "a figure", quote=True)
    return (f'<div class="d2l-figure" role="figure" aria-label="{alt}">{plot}'
            f'<p class="d2l-figure-caption"><span class="d2l-figure-number">Figure {number}.</span> '
            f'{alt}</p></div>')


def machine_line(*, day: str, quick: bool, machine: str, usable_cpus: float, spare_cpus: float) -> str:
    """The page's footer: the date (``day``, e.g. ``"03 December 2025"``), the mode, the machine line, and a
    sentence when the machine was busy (a busy machine turns timing claims into "can't tell")."""
    busy = (f" The machine was busy ({usable_cpus - spare_cpus:.1f} of {usable_cpus:g} CPUs with other "
            "work): timing checks on this page may say \"can't tell\" where a quiet machine decides them."
            if spare_cpus < 0.75 * usable_cpus else "")
    return f"This page was executed on {day} in {'quick' if quick else 'default'} mode, on: {machine}.{busy}"
