"""pyprof: which PyTorch op, layer and line of code launched each GPU kernel, and how close it ran to the GPU's limits.

Three stages, each a subpackage and a command:
``pyprof.nvtx`` (capture: ``pyprof.init()``), ``pyprof.parse`` (export -> records), ``pyprof.prof`` (records -> tables).

Importing ``pyprof`` does not import torch: the capture functions below load it on first use, so that
``pyprof.parse`` and ``pyprof.prof`` run on machines without torch.
"""
from __future__ import annotations

__version__ = "0.1.0"

_CAPTURE_API = ("init", "uninit", "wrap", "layer", "is_initialized", "profiling", "step", "forward_steps",
                "RecordingSink", "ProfilerSink")


def __getattr__(name: str):
    if name in _CAPTURE_API:
        from pyprof import nvtx

        return getattr(nvtx, name)
    if name == "load":  # notebooks: records or an export as pandas DataFrames (pyprof.report.dataframes)
        from pyprof.report.dataframes import load

        return load
    raise AttributeError(f"module 'pyprof' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_CAPTURE_API) + ["load"])
