"""Views over parse's records (issue 6): step breakdown, operators, kernels, GPU time per source line, layers,
recommendations, workers; rendered in the terminal (``pyprof prof --view NAME``) and as one self-contained
HTML page (``pyprof report``), plus a Chrome/Perfetto trace export.

The contract between the views and the renderers is :class:`pyprof.report.model.Table`.
"""
from pyprof.report.model import Table

__all__ = ["Table"]
