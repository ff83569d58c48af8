# Injected (hidden) as the first cell of every page by site/build_site.py; not part of the notebooks.
# Figures: plotly's HTML for a page that loads plotly.js once (the site's <head>), not once per figure,
# inside a figure named by its text alternative (d2l_async.viz.alt_text: the title and the fact the figure
# shows) and numbered in the page's order, with that text as its caption ("Figure 3. ..."), which a
# reader without the plot (a screen reader, no JavaScript, a printout) reads instead.
# Dashboards: a widget needs a running kernel; the page says so where the notebook shows one.
import html as _html

import ipywidgets as _widgets
import plotly.graph_objects as _go
import plotly.io as _pio
from plotly.io.base_renderers import MimetypeRenderer as _MimetypeRenderer

from d2l_async.viz import alt_text as _alt_text


_figures = [0]  # this page's figures so far: each display is the next number


def _figure_html(fig_dict):
    plot = _pio.to_html(fig_dict, include_plotlyjs=False, full_html=False, validate=False, auto_play=False,
                        config={"responsive": True})
    alt = _html.escape(_alt_text(fig_dict) or "a figure", quote=True)
    _figures[0] += 1
    return (f'<div class="d2l-figure" role="figure" aria-label="{alt}">{plot}'
            f'<p class="d2l-figure-caption"><span class="d2l-figure-number">Figure {_figures[0]}.</span> '
            f'{alt}</p></div>')


class _SiteRenderer(_MimetypeRenderer):
    def to_mimebundle(self, fig_dict):
        return {"text/html": _figure_html(fig_dict)}


_pio.renderers["d2l_site"] = _SiteRenderer()
_pio.renderers.default = "d2l_site"
_NOTE = ('<div class="admonition note d2l-needs-kernel"><p class="admonition-title">Needs a kernel</p>'
         '<p>This dashboard runs experiments when its controls move: it needs a running Python kernel. '
         'Open this notebook with the launch button at the top of the page (Binder, Colab or a '
         'JupyterHub) to use it; the figures above were drawn when this page was built.</p></div>')


def _site_bundle(self, **kwargs):
    if isinstance(self, _go.FigureWidget):  # a live figure: draw it as a static one
        return {"text/html": _figure_html(_go.Figure(self).to_dict()), "text/plain": "FigureWidget"}
    return {"text/html": _NOTE, "text/plain": "(a dashboard: needs a running kernel)"}


_widgets.Widget._repr_mimebundle_ = _site_bundle
