# Injected (hidden) as the first cell of every page by site/build_site.py; not part of the notebooks.
# Figures and dashboards as site/page_outputs.py renders them (staged beside the notebooks): each plotly
# figure numbered in the page's display order; every widget replaced by the needs-a-kernel note, except a
# live figure (FigureWidget), drawn as a static one.
import ipywidgets as _widgets
import plotly.graph_objects as _go
import plotly.io as _pio
from plotly.io.base_renderers import MimetypeRenderer as _MimetypeRenderer

from page_outputs import NEEDS_KERNEL as _NOTE, NEEDS_KERNEL_TEXT as _NOTE_TEXT, figure_html as _page_figure

_figures = [0]  # this page's figures so far: each display is the next number


def _figure_html(fig_dict):
    _figures[0] += 1
    return _page_figure(fig_dict, _figures[0])


class _SiteRenderer(_MimetypeRenderer):
    def to_mimebundle(self, fig_dict):
        return {"text/html": _figure_html(fig_dict)}


_pio.renderers["d2l_site"] = _SiteRenderer()
_pio.renderers.default = "d2l_site"


def _site_bundle(self, **kwargs):
    if isinstance(self, _go.FigureWidget):  # a live figure: draw it as a static one
        return {"text/html": _figure_html(_go.Figure(self).to_dict()), "text/plain": "FigureWidget"}
    return {"text/html": _NOTE, "text/plain": _NOTE_TEXT}


_widgets.Widget._repr_mimebundle_ = _site_bundle
