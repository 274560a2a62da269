"""The prof stage: FLOPs, bytes, Tensor Core use and roofline for every kernel of pyprof.parse's records.

Public API::

    from pyprof.prof import register, Args, Estimate, NotModelled  # add a formula for your own op
    from pyprof.prof import Modeller, run, summarize, read_records  # use prof from Python

Importing this package never imports torch.
"""
from __future__ import annotations

from pyprof.common import one_blas_thread_if_run

one_blas_thread_if_run(__name__)  # before this package imports numpy (python -m pyprof.prof)

from pyprof.prof.model import formulas  # noqa: F401  (registers the built-in formulas)
from pyprof.prof.model.args import Args, Tensor, estimate
from pyprof.prof.model.modeller import Modeller, Result
from pyprof.prof.load.reader import read_records
from pyprof.prof.model.registry import Estimate, NotModelled, names, register
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.table.per_kernel import run
from pyprof.prof.model.roofline import Peaks
from pyprof.prof.table.summary import summarize



def iter_records(stream, path: str):
    """Deprecated name of ``read_records`` (renamed: parse had a function of the same name that returns
    something else). Kept for one release; warns."""
    import warnings

    warnings.warn("pyprof.prof.iter_records is now pyprof.prof.read_records; the old name goes in the next "
                  "release", DeprecationWarning, stacklevel=2)
    return read_records(stream, path)


__all__ = ["Args", "Coverage", "Estimate", "Modeller", "NotModelled", "Peaks", "Result", "Tensor", "estimate",
           "read_records", "names", "register", "run", "summarize"]
